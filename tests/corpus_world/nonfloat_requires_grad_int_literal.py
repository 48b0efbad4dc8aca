# source: https://github.com/pytorch/pytorch/issues/53466
# expect-kind: non-float-requires-grad
# The documentation example creates the tensor from an integer literal, so its
# dtype is int64 and it cannot be made to require gradients.
import torch

x = torch.tensor([1])
x.requires_grad = True  # <- culprit
with torch.no_grad():
    y = x * 2
print(y.requires_grad)
