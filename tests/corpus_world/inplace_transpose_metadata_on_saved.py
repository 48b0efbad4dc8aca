# source: https://github.com/pytorch/pytorch/issues/5871
# expect-kind: inplace-modified-saved-tensor
# expect-node: SigmoidBackward0
# transpose_ on a saved sigmoid output: a metadata-only in-place op still
# bumps the version of the tensor backward needs.
import torch

torch.manual_seed(0)
x = torch.randn(2, 3, requires_grad=True)
p = torch.sigmoid(x)  # <- saved
p.transpose_(0, 1)  # <- culprit
p.sum().backward()  # <- backward
