# source: https://github.com/pytorch/pytorch/issues/6990
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# Swapping in new weights with `w.data = ...` while a forward that saved w
# waits for backward: the saved weight now reads the new values.
import torch

torch.manual_seed(0)
w = torch.randn(3, 2, requires_grad=True)
x = torch.randn(4, 3, requires_grad=True)
y = x @ w  # <- saved
w.data = torch.zeros(3, 2)  # <- culprit
y.sum().backward()  # <- backward
print("grad", x.grad[0])
