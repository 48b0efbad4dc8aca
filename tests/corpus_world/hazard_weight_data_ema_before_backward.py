# source: https://github.com/akanimax/pro_gan_pytorch/pull/37
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# An exponential moving average written into the live weights through .data
# between forward and backward: mm saved the weight for the input gradient.
import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Linear(3, 3, bias=False)
shadow = torch.zeros(3, 3)
x = torch.randn(2, 3, requires_grad=True)
y = net(x)  # <- saved
net.weight.data.mul_(0.5).add_(0.5 * shadow)  # <- culprit
y.pow(2).sum().backward()  # <- backward
print("grad", x.grad[0])
