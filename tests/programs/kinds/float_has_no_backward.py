import torch

w = torch.randn(3, requires_grad=True)
loss = (w ** 2).sum().item()  # <- culprit
loss.backward()
