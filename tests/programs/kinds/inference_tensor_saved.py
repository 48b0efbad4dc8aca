import torch

with torch.inference_mode():  # <- culprit
    x = torch.randn(3)
w = torch.randn(3, requires_grad=True)
y = (w * x).sum()
y.backward()
