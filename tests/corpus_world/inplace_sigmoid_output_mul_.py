# source: https://github.com/pytorch/pytorch/issues/9391
# expect-kind: inplace-modified-saved-tensor
# expect-node: SigmoidBackward0
# Item assignment into sigmoid's output, which SigmoidBackward0 saved.
import torch

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = a.sigmoid()  # <- saved
b[1] = 2  # <- culprit
b.sum().backward()  # <- backward
print("grad", a.grad)
