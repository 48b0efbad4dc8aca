# expect-kind: view-inplace
# A slice taken inside torch.no_grad() is modified in place later with grad enabled.
import torch

torch.manual_seed(0)
x = torch.randn(6, requires_grad=True)
h = x * 2
with torch.no_grad():
    head = h[:3]
head.add_(1.0)  # <- culprit
h.sum().backward()
