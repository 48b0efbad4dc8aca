# source: https://github.com/pytorch/pytorch/issues/3890
# expect-kind: non-leaf-requires-grad
# To look at the gradient of an intermediate result the author sets
# requires_grad on it; it is the output of sigmoid, not a leaf.
import torch

x = torch.zeros(3, 3, requires_grad=True)
s = torch.sigmoid(x)
s.requires_grad = True  # <- culprit
s.retain_grad()
total = torch.sum(s)
total.backward()
print(s.grad)
