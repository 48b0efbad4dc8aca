"""Adam's step with gradients whose own ``__torch_function__`` raises, once, from inside a write's call (the
program's code, run by torch inside ``exp_avg.lerp_(grad, ...)``), after thirty steps: by then the step's writes
go by its lane (NOTE [A step's lane], NOTE [The compiled lane]). The program catches the error, prints where it
went (the traceback's functions) and trains on; its output is python's under tensorscope, both ways."""
import os
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F


class Refusing(torch.Tensor):
    armed = False

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if cls.armed and getattr(func, "__name__", "") == "lerp_":
            cls.armed = False
            raise ValueError("refused in " + func.__name__)
        return super().__torch_function__(func, types, args, kwargs or {})


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=False)
x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
for i in range(40):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    for p in model.parameters():
        p.grad = torch.Tensor._make_subclass(Refusing, p.grad)
    Refusing.armed = i == 30
    try:
        opt.step()
    except ValueError as e:
        frames = traceback.extract_tb(e.__traceback__)
        print(i, type(e).__name__, e, [(os.path.basename(f.filename), f.name) for f in frames])
print(repr(loss.item()), [repr(p.detach().sum().item()) for p in model.parameters()])
