import torch

w = torch.randn(3, requires_grad=True)
h = w * 2
loss = (h * h).sum()
h.detach_()  # <- culprit
loss.backward()
