import torch

w = torch.randn(3, requires_grad=True)
h = w * 2
h.requires_grad = False  # <- culprit
