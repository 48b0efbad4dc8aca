# source: https://github.com/pytorch/pytorch/pull/88860
# expect-kind: saved-detached-inplace
# detach_() on exp's output after a product saved it: the saved tensor lost its
# history in place.
import torch

torch.manual_seed(0)
x = torch.randn(3, requires_grad=True)
y = x.exp()
z = y * y  # <- saved
y.detach_()  # <- culprit
z.sum().backward()  # <- backward
