"""Row 5: the program's own SIGTERM handler keeps working, and it sees python's default disposition first."""
import signal
import sys

import torch

print("default", signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP), flush=True)


def on_term(signum, frame):
    print("handled", signal.Signals(signum).name, flush=True)
    sys.exit(3)


previous = signal.signal(signal.SIGTERM, on_term)
print("previous", previous, flush=True)
x = torch.zeros(4)
w = torch.ones(4, requires_grad=True)
sys.stdout.write("ready\n")  # one write: the handler cannot run between "ready" and its newline
sys.stdout.flush()
while True:
    x.add_(1)
    (x * w).sum().backward()
    w.grad = None
