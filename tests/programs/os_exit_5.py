"""os._exit skips flushing: under plain python with a pipe, the buffered stdout line is lost."""
import os
import sys

import torch

x = torch.ones(2, requires_grad=True)
y = (x * 3).sum()
y.backward()
print("buffered line (lost when stdout is a pipe)", x.grad.tolist())
print("stderr line", file=sys.stderr)
os._exit(5)
