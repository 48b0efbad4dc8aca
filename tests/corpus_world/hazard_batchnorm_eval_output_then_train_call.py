# source: https://github.com/pytorch/pytorch/issues/586
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-node: NativeBatchNormBackward0
# An eval-mode BatchNorm output waits for backward while a training-mode call
# on another batch updates the running statistics it saved: the gradient uses
# the new running variance.
import torch
import torch.nn as nn

torch.manual_seed(0)
bn = nn.BatchNorm1d(3)
bn.eval()
inp = torch.randn(4, 3, requires_grad=True)
out = bn(inp)  # <- saved
bn.train()
bn(torch.randn(4, 3) * 5 + 3)  # <- culprit
out.pow(2).sum().backward()  # <- backward
print("grad", inp.grad[0])
