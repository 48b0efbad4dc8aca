# source: https://github.com/pytorch/pytorch/issues/7335
# expect-kind: non-leaf-grad-none
# requires_grad=True is given to the tensor before the .to() conversion, so the
# name refers to the converted copy; its .grad is None after backward.
import numpy as np
import torch

a = torch.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
a = a.to(torch.float32)  # <- culprit
b = torch.ones(3, dtype=a.dtype)
l = a @ b
l.backward()
print("grad norm", a.grad.norm())  # <- culprit-alt
