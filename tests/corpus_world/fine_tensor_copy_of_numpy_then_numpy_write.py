# source: https://github.com/mrdbourke/pytorch-deep-learning/issues/1279
# expect-kind: none
# torch.tensor(array) copies, so writing the NumPy buffer afterwards cannot
# change what backward reads.
import numpy as np
import torch

rng = np.random.default_rng(0)
buf = rng.standard_normal((4, 3)).astype(np.float32)
w = torch.ones(3, 2, requires_grad=True)
x = torch.tensor(buf)
y = x @ w
buf[:] = 0.0
y.sum().backward()
print("grad", w.grad.flatten())
