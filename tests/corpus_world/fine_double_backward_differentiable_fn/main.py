# source: https://github.com/pytorch/pytorch/issues/2210
# expect-kind: none
# The gradient penalty goes through the package's custom activation whose
# backward is written with differentiable torch ops (no @once_differentiable).
import torch
import torch.nn as nn

from ops.swish import swish

torch.manual_seed(0)
lin = nn.Linear(4, 3)
x = torch.randn(5, 4, requires_grad=True)
y = torch.randint(0, 3, (5,))
l = nn.functional.cross_entropy(swish(lin(x)), y)
g, = torch.autograd.grad(l, x, create_graph=True)
L = l + torch.sum(g * x)
L.backward()
print("grad", lin.weight.grad.shape)
