# source: https://github.com/pytorch/pytorch/pull/6597
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-node: MmBackward0
# The input batch is a torch.from_numpy view of a reusable NumPy buffer; the
# next batch is loaded into the buffer before backward, and the weight
# gradient silently uses the new data.
import numpy as np
import torch

rng = np.random.default_rng(0)
buf = rng.standard_normal((4, 3)).astype(np.float32)
w = torch.ones(3, 2, requires_grad=True)
x = torch.from_numpy(buf)
y = x @ w  # <- saved
buf[:] = rng.standard_normal((4, 3))  # <- culprit
y.sum().backward()  # <- backward
print("grad", w.grad.flatten())
