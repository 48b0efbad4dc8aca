"""Recursion to depth 3000 with tensor ops at every level (recursion limit raised to 5000)."""
import sys

import torch

sys.setrecursionlimit(5000)


def rec(t, n):
    if n == 0:
        return t
    t = t * 1.0001 + 0.0001
    return rec(t, n - 1)


x = torch.ones(3, dtype=torch.float64, requires_grad=True)
out = rec(x, 3000)
out.sum().backward()
print("value", out.tolist())
print("grad", x.grad.tolist())


def rec_inplace(t, n):
    if n == 0:
        return 0
    t.add_(1)
    return 1 + rec_inplace(t[1:] if t.numel() > 1 else t, n - 1)


y = torch.zeros(5)
print("inplace depth", rec_inplace(y, 2500), y.tolist(), y._version)
