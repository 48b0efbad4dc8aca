# source: https://github.com/mlverse/torchbook_materials/issues/1
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# Weights refreshed through the NumPy view of a parameter (as when copying in
# a checkpoint with NumPy) between forward and backward.
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
layer = nn.Linear(3, 2, bias=False)
x = torch.randn(4, 3, requires_grad=True)
y = layer(x)  # <- saved
layer.weight.detach().numpy()[:] = np.full((2, 3), 0.25, dtype=np.float32)  # <- culprit
y.sum().backward()  # <- backward
print("grad", x.grad[0])
