# source: https://github.com/source-separation/tutorial/issues/18
# expect-kind: view-inplace
# A slice taken under torch.no_grad() of a tensor that requires grad, then
# modified in place once grad mode is back on.
import torch

torch.manual_seed(0)
w = torch.randn(4, 3, requires_grad=True)
h = w * 2
with torch.no_grad():
    first = h[0]
first.mul_(0.5)  # <- culprit
print(h.sum())
