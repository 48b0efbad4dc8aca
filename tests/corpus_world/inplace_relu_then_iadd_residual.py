# source: https://github.com/pytorch/pytorch/issues/5687
# expect-kind: inplace-modified-saved-tensor
# expect-node: ReluBackward0
# An in-place addition after an in-place ReLU: the residual is added into the
# tensor relu_ saved as its output.
import torch
import torch.nn as nn

torch.manual_seed(0)
relu = nn.ReLU(inplace=True)
fc = nn.Linear(4, 4)
x = torch.randn(3, 4, requires_grad=True)
out = relu(fc(x))  # <- saved
out += x  # <- culprit
out.sum().backward()  # <- backward
