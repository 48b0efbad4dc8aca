# expect-kind: none
# The fixed twin of grad_of_vector_output.py: the loss is reduced to one number.
import torch
from torch.func import grad


def loss(w, x, y):
    return ((x @ w - y) ** 2).mean()


w = torch.randn(3)
x = torch.randn(5, 3)
y = torch.randn(5)
print(grad(loss)(w, x, y).shape)
