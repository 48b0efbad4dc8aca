"""SIGTERM or SIGHUP to the process group (timeout, Slurm, a closed terminal) of a program whose children
die by it while its own SIGCHLD handler raises, as torch's does for a DataLoader worker killed by a signal
(torch/utils/data/_utils/signal_handling.py). Under python the process is gone before any handler runs.
Here the children take 0 to 0.6 s to die, so their SIGCHLD comes while tensorscope writes the report."""
import os
import signal
import sys
import time

import torch


def child_died(signum, frame):
    raise RuntimeError("a worker was killed by a signal")


kept = [torch.full((2,), float(i)) for i in range(3000)]  # a report that takes a while to build
w = torch.ones(3, requires_grad=True)
(w * 2).sum().backward()
for i in range(20):
    if os.fork() == 0:  # a worker: ends a little after the signal that ends the group
        def leave(signum, frame, delay=0.03 * i):
            time.sleep(delay)
            os._exit(0)
        signal.signal(signal.SIGTERM, leave)
        signal.signal(signal.SIGHUP, leave)
        while True:
            time.sleep(1)
signal.signal(signal.SIGCHLD, child_died)
print("ready", flush=True)
while True:
    time.sleep(0.01)
