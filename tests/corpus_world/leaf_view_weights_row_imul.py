# source: https://github.com/fastai/fastbook/pull/471
# expect-kind: leaf-inplace
# Nudging one weight by hand to see the loss move: weights[0] is a view of a
# leaf that requires grad.
import torch

torch.manual_seed(0)
weights = torch.randn(5, 1).requires_grad_()
x = torch.randn(3, 5)
print((x @ weights).sum())
weights[0] *= 1.0001  # <- culprit
print((x @ weights).sum())
