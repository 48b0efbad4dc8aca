"""In-place writes on lines past their first events (NOTE [A counted write, compiled] in speedups.py), from the
callers a compiled body could get wrong: a plain write, a subclass with no ``__torch_function__`` of its own and one
with its own, a write through ``.data``, one under ``no_grad``, an ``out=`` write, an in-place dunder, an index write,
``copy_``, a write after a young view died, a write into a storage with a kept alias (the row kept on the 70th
pass changed: the program prints its sum), a write that fails at a counted line (the program prints the traceback's
functions), a write under a torch-function mode and writes from a thread. Its output is python's under tensorscope,
both ways."""
import os
import threading
import traceback

import torch
from torch.overrides import TorchFunctionMode


class Plain(torch.Tensor):
    pass


class Own(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class Passing(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def threaded(n, t):
    for _ in range(n):
        t.mul_(1.0)


weight = torch.zeros(3, 8)
param = torch.nn.Parameter(torch.ones(8))
plain = torch.ones(8).as_subclass(Plain)
own = torch.ones(8).as_subclass(Own)
out = torch.zeros(8)
kept = []
total = 0.0
for i in range(80):
    a = torch.full((8,), float(i % 7))
    b = a.clone()
    b.mul_(2)
    plain.add_(1)
    own.add_(1)
    param.data.mul_(0.5)
    with torch.no_grad():
        param.add_(1)
    torch.add(a, b, out=out)
    b += 1
    b[0] = 3.0
    out.copy_(b)
    total += float(b[1:].sum())
    b.sub_(1)
    row = weight[0]
    if i == 70:
        kept.append(row)
    weight.add_(1)
    try:
        b.add_(torch.ones(7 if i == 60 else 8))
    except RuntimeError as e:
        frames = traceback.extract_tb(e.__traceback__)
        print(i, type(e).__name__, [(os.path.basename(f.filename), f.name) for f in frames])
    if i % 20 == 0:
        with Passing():
            b.div_(2)
t = torch.ones(4)
worker = threading.Thread(target=threaded, args=(80, t))
worker.start()
worker.join()
print(total, kept[0].sum().item(), float(plain.sum()), float(own.sum()), float(param.detach().sum()), float(out.sum()))
