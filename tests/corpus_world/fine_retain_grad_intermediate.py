# source: https://github.com/pytorch/pytorch/issues/3890
# expect-kind: none
# The intermediate's gradient is kept with retain_grad() instead of setting
# requires_grad on a non-leaf.
import torch

x = torch.zeros(3, 3, requires_grad=True)
s = torch.sigmoid(x)
s.retain_grad()
total = torch.sum(s * torch.arange(9.0).view(3, 3))
total.backward()
print("grad", s.grad[1].tolist())
