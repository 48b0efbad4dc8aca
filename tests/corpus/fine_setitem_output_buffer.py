# expect-kind: none
# Filling a preallocated output buffer row by row: every row is a fresh tanh
# output copied in; the saved tanh outputs themselves are never written.
import torch

torch.manual_seed(0)
x = torch.randn(5, 2, 3)
w = torch.randn(3, 4, requires_grad=True)
out = torch.zeros(5, 2, 4)
for t in range(5):
    out[t] = torch.tanh(x[t] @ w)
out.pow(2).sum().backward()
print(w.grad.norm() > 0)
