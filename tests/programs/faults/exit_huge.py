"""Row 10: sys.exit(2**70) exits 255 (the status does not fit a C long)."""
import sys

import torch

print("tensor", torch.ones(2).tolist(), flush=True)
sys.exit(2**70)
