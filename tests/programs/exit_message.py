import sys

import torch

x = torch.arange(3.0)
x.add_(1)
print("before exit", x.tolist())
sys.exit("fatal: bad configuration (version %d)" % x._version)
