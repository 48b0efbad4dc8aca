# source: https://pytorch.org/docs/stable/generated/torch.func.grad.html
# expect-kind: functorch-transform
# torch.func.grad needs a function that returns one number; this loss returns one value per element.
import torch
from torch.func import grad


def loss(w, x, y):
    return (x @ w - y) ** 2


w = torch.randn(3)
x = torch.randn(5, 3)
y = torch.randn(5)
g = grad(loss)(w, x, y)  # <- culprit
print(g)
