import torch

with torch.inference_mode():
    x = torch.randn(3)  # <- setup
w = torch.randn(3, requires_grad=True)
y = (w * x).sum()  # <- culprit
y.backward()
