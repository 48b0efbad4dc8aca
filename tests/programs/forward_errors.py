"""Exceptions raised inside a module's forward, before any backward call (tests/test_forward_tracebacks.py).

Under python each module call takes torch's fast path; the program prints the tracebacks it catches (and
the frames `traceback.extract_tb` sees), then ends with an uncaught BaseException raised in a forward.
"""
import sys
import traceback

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))

    def forward(self, x, step):
        if step == 50:
            x = x[:, :3]  # a shape mismatch in the 50th step of an inference loop
        return self.body(x)


class Stop(BaseException):
    pass


class Halt(nn.Module):
    def forward(self, x):
        raise Stop("halted inside forward")


def show(e):
    for fs in traceback.extract_tb(e.__traceback__):
        print(fs.name, fs.lineno, fs.line, file=sys.stderr)
    traceback.print_exc()


torch.manual_seed(0)
model = Block()
try:
    model(torch.randn(5, 3), 0)  # the very first forward fails
except RuntimeError as e:
    show(e)

outs = []
for step in range(60):
    try:
        outs.append(model(torch.randn(5, 4), step))
    except RuntimeError as e:
        print("step", step, file=sys.stderr)
        show(e)

hooked = nn.Sequential(nn.Linear(4, 8), nn.Linear(7, 2))
hooked[1].register_forward_hook(lambda m, a, o: None)  # a hook of the program's: torch's slow path under python too
try:
    hooked(torch.randn(2, 4))
except RuntimeError as e:
    show(e)

print(len(outs), "outputs kept")
nn.Sequential(nn.Linear(4, 4), Halt())(torch.randn(1, 4))
