# expect-kind: none
# In-place writes to tensors no backward node saved: the mm output and the bias add.
import torch

torch.manual_seed(0)
x = torch.randn(5, 3)
w = torch.randn(3, 4, requires_grad=True)
b = torch.randn(4, requires_grad=True)
h = x @ w
h += b
h.mul_(0.5)
loss = h.pow(2).sum()
loss.backward()
print(w.grad.shape, b.grad.shape)
