# source: https://github.com/pytorch/pytorch/pull/6597
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-node: MulBackward0
# A leaf made from NumPy with requires_grad_(); NumPy keeps writing the array
# (an in-place augmentation) before backward, and the other factor's gradient
# reads the new values.
import numpy as np
import torch

arr = np.array([1.0, 2.0, 3.0])
img = torch.from_numpy(arr).requires_grad_()
scale = torch.tensor([0.5, 0.5, 0.5], dtype=torch.float64, requires_grad=True)
out = (img * scale).sum()  # <- saved
arr *= 10.0  # <- culprit
out.backward()  # <- backward
print("grad", scale.grad)
