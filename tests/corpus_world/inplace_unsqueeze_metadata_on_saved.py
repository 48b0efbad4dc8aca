# source: https://github.com/pytorch/pytorch/issues/5871
# expect-kind: inplace-modified-saved-tensor
# expect-node: TanhBackward0
# unsqueeze_ changes only the shape of tanh's saved output, but it is an
# in-place op: the version moves and backward refuses the saved tensor.
import torch

torch.manual_seed(0)
x = torch.randn(4, requires_grad=True)
h = torch.tanh(x)  # <- saved
h.unsqueeze_(0)  # <- culprit
(h * 2).sum().backward()  # <- backward
