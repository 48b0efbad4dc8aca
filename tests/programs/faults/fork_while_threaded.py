"""A fork while another thread runs. Python 3.12+ warns at the program's `os.fork()` line ("This process
(pid=N) is multi-threaded": a DeprecationWarning, shown in __main__ by the default filters, once per line
and text); on a GPU machine a backward's device threads are such a thread. Other warnings keep their
once-per-line registry across the forks."""
import os
import threading
import warnings

import torch

stop = threading.Event()
helper = threading.Thread(target=stop.wait, daemon=True)
helper.start()
x = torch.ones(2, requires_grad=True)
(x * 2).sum().backward()
for i in range(3):
    warnings.warn("a warning of the program's own")
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
other = os.fork()
if other == 0:
    os._exit(3)
os.waitpid(other, 0)
stop.set()
print("forked 4 children", x.grad.tolist())
