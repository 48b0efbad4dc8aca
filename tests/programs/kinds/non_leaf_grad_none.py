import torch

w = torch.randn(3, requires_grad=True)
h = w * 2  # <- culprit
loss = (h ** 2).sum()
loss.backward()
step = h.grad * 0.1
