# source: https://github.com/pytorch/pytorch/pull/33639
# expect-kind: inplace-backward-unsupported
# An in-place leaky ReLU with a negative slope: its backward cannot recover the
# sign of the input from the overwritten output, and PyTorch refuses it.
import torch
import torch.nn.functional as F

torch.manual_seed(0)
w = torch.randn(4, 4, requires_grad=True)
x = torch.randn(3, 4)
h = x @ w
h = F.leaky_relu_(h, negative_slope=-0.2)  # <- culprit saved
loss = h.pow(2).sum()
loss.backward()  # <- backward
