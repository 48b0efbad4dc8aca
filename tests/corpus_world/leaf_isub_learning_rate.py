# source: https://github.com/BaiTheBest/SparseLLM/issues/13
# expect-kind: leaf-inplace
# s -= lr * s.grad on a tensor created with requires_grad=True.
import torch

torch.manual_seed(0)
target = torch.randn(6)
s = torch.zeros(6, requires_grad=True)
lr = 0.5
loss_s = (s - target).pow(2).sum()
loss_s.backward()
s -= lr * s.grad  # <- culprit
s.grad.zero_()
print(s)
