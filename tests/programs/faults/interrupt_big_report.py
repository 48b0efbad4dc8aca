"""Row 6: Ctrl-C ends a program that holds many tensors (a report that takes a while to build); the
test presses Ctrl-C again while the report is built."""
import sys

import torch

xs = [torch.ones(1) for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)]
print("ready", len(xs), flush=True)
raise KeyboardInterrupt
