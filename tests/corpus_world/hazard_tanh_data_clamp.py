# source: https://github.com/r9y9/tacotron_pytorch/issues/16
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-node: TanhBackward0
# Clamping a tanh activation through .data after the fact: TanhBackward0's
# saved output changes without a version bump.
import torch

torch.manual_seed(0)
x = torch.randn(6, requires_grad=True)
h = torch.tanh(x * 3)  # <- saved
h.data.clamp_(-0.5, 0.5)  # <- culprit
h.sum().backward()  # <- backward
print("grad", x.grad)
