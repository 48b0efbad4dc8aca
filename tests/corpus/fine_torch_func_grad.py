# expect-kind: none
# torch.func.grad of a pure function, and a per-sample gradient with vmap.
import torch
from torch.func import grad, vmap


def loss_fn(w, x, y):
    return ((x @ w - y) ** 2).mean()


torch.manual_seed(0)
w = torch.randn(3)
x = torch.randn(8, 3)
y = torch.randn(8)
g = grad(loss_fn)(w, x, y)
per_sample = vmap(grad(loss_fn), in_dims=(None, 0, 0))(w, x.unsqueeze(1), y.unsqueeze(1))
print(g.shape, per_sample.shape)
print(torch.allclose(per_sample.mean(0), g, atol=1e-5))
