"""`w` is never used on the way to the loss; a `torch.no_grad()` block reads other tensors only, so it
is not the reason."""
import torch

x = torch.randn(3, requires_grad=True)
w = torch.randn(3, requires_grad=True)
with torch.no_grad():
    scale = (x * 2).mean()
y = x * scale
loss = (y ** 2).sum()
gx, gw = torch.autograd.grad(loss, [x, w])
