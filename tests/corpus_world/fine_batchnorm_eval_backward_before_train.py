# source: https://github.com/pytorch/pytorch/issues/586
# expect-kind: none
# Backpropagating an eval-mode BatchNorm output before the next training-mode
# call updates the running statistics.
import torch
import torch.nn as nn

torch.manual_seed(0)
bn = nn.BatchNorm1d(3)
bn.eval()
inp = torch.randn(4, 3, requires_grad=True)
out = bn(inp)
out.pow(2).sum().backward()
bn.train()
bn(torch.randn(4, 3) * 5 + 3)
print("grad", inp.grad[0])
