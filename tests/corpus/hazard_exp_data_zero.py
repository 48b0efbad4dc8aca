# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-alias: y.data
# expect-node: ExpBackward0
# Writing through .data bypasses the version counter: backward runs without an
# error but uses the zeroed exp output, so x.grad is 0 instead of exp(x).
import torch

x = torch.tensor([3.0], requires_grad=True)
y = x.exp()  # <- saved
y.data.zero_()  # <- culprit
y.sum().backward()  # <- backward
print("x.grad =", x.grad, "expected", torch.exp(torch.tensor([3.0])))
