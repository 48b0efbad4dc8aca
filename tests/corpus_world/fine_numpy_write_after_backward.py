# source: https://github.com/pytorch/pytorch/pull/6597
# expect-kind: none
# The NumPy buffer behind a from_numpy input is refilled only after backward
# has used it.
import numpy as np
import torch

rng = np.random.default_rng(0)
buf = rng.standard_normal((4, 3)).astype(np.float32)
w = torch.ones(3, 2, requires_grad=True)
for step in range(2):
    x = torch.from_numpy(buf)
    (x @ w).sum().backward()
    buf[:] = rng.standard_normal((4, 3))
print("grad", w.grad.flatten())
