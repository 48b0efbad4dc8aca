"""`w` is used only inside `torch.no_grad()`, so the loss does not depend on it and autograd.grad
refuses to differentiate with respect to it."""
import torch

x = torch.randn(3, requires_grad=True)
w = torch.randn(3, requires_grad=True)
with torch.no_grad():
    scale = (w * 2).mean()
y = x * scale
loss = (y ** 2).sum()
gx, gw = torch.autograd.grad(loss, [x, w])
