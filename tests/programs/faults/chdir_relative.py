"""Row 8: a Hydra-style program changes its working directory; a relative -o still lands where tensorscope started."""
import os
import sys

import torch

os.makedirs(sys.argv[1], exist_ok=True)
os.chdir(sys.argv[1])
print("now in", os.path.basename(os.getcwd()), torch.ones(2).tolist(), flush=True)
