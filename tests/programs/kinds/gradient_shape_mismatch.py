import torch

x = torch.randn(4, 3, requires_grad=True)
out = x * 2
out.backward(torch.ones(3))  # <- culprit
