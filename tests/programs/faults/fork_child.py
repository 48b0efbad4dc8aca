"""Row 9: a forked child that exits normally prints and writes nothing of the parent's report; a
second child outlives the parent (the test waits for it: it holds the pipes open)."""
import os
import sys
import time

import torch

x = torch.ones(2, requires_grad=True)
(x * 2).sum().backward()
print("parent before fork", x.grad.tolist(), flush=True)
pid = os.fork()
if pid == 0:
    print("child", os.getpid() != 0, flush=True)
    sys.exit(0)
os.waitpid(pid, 0)
late = os.fork()
if late == 0:
    time.sleep(3)
    print("late child done", flush=True)
else:
    print("parent done", flush=True)
