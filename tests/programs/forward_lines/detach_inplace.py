"""An intermediate saved for backward (as an input of `h * h.sin()`) is detached in place with
`detach_()` before backward: PyTorch refuses to use it."""
import torch

w = torch.randn(3, requires_grad=True)
h = w * 2
out = (h * h.sin()).sum()
h.detach_()
out.backward()
