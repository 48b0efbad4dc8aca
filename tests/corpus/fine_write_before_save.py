# expect-kind: none
# The in-place clamp happens BEFORE the tensor is used by an op that saves it.
import torch

torch.manual_seed(0)
x = torch.randn(4, 3)
w = torch.randn(3, 3, requires_grad=True)
h = x @ w
h.clamp_(min=-1.0, max=1.0)
y = torch.sigmoid(h)
y.sum().backward()
print(w.grad.shape)
