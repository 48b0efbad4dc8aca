"""A function's locals are freed as under python while tensorscope reads the running frame (NOTE [Locals of a
running frame]): each function drops a tensor after an event that makes tensorscope read its frame, and
prints whether a weak reference to it is dead."""
import weakref

import torch
from torch import nn


def tie():
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    big = torch.randn(1000)
    r = weakref.ref(big)
    b.weight = a.weight  # shared state: the registration hook reads this frame's names
    del big
    return r() is None


def step():
    x = torch.randn(4, requires_grad=True)
    big = torch.randn(1000)
    r = weakref.ref(big)
    scale = (torch.zeros(4) / torch.zeros(4)).requires_grad_()  # NaN, computed outside autograd
    loss = (x * scale).sum()
    loss.backward()  # a NaN loss: explain names the line that computed `scale` from this frame's names;
    # a step boundary: the growth sample reads this frame
    del big
    return r() is None


def norm():
    bn = nn.BatchNorm1d(3)
    big = torch.randn(1000)
    r = weakref.ref(big)
    bn(torch.randn(4, 3))
    bn(torch.randn(4, 3))
    del big
    return r() is None


print("tie", tie())
for i in range(3):
    print("step", i, step())
print("norm", norm())
