import torch

a = torch.randn(3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
loss = (a * 2).sum()
ga, gb = torch.autograd.grad(loss, [a, b])  # <- culprit
