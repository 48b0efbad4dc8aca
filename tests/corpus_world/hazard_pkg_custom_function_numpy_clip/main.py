# source: https://github.com/pytorch/pytorch/issues/5871
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-node: SigmoidBackward0
# An ops package implements a clip as a custom autograd.Function that works
# on the NumPy view of its input, writing it in place without mark_dirty.
import torch

from ops.clip import numpy_clip

torch.manual_seed(0)
x = torch.randn(6, requires_grad=True)
p = torch.sigmoid(x * 4)  # <- saved
q = numpy_clip(p, 0.2, 0.8)
(p + q).sum().backward()  # <- backward
print("grad", x.grad)
