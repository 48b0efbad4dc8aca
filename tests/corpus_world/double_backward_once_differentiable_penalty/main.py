# source: https://github.com/pytorch/pytorch/issues/2210
# expect-kind: double-backward-unsupported
# A gradient penalty (grad of the loss w.r.t. the input, create_graph=True)
# through an activation implemented in the package as a custom Function whose
# backward is marked @once_differentiable.
import torch
import torch.nn as nn

from ops.swish import swish

torch.manual_seed(0)
lin = nn.Linear(4, 3)
x = torch.randn(5, 4, requires_grad=True)
y = torch.randint(0, 3, (5,))
logits = swish(lin(x))  # <- saved
l = nn.functional.cross_entropy(logits, y)
g, = torch.autograd.grad(l, x, create_graph=True)
L = l + torch.sum(g * x)
L.backward()  # <- backward
