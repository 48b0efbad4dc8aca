"""Row 5: killed by SIGTERM, python loses what sys.stdout still buffers (stdout a pipe, no -u)."""
import sys

import torch

print("buffered, never flushed", torch.ones(2).tolist())
sys.stderr.write("ready\n")
sys.stderr.flush()
x = torch.zeros(4)
while True:
    x.add_(1)
