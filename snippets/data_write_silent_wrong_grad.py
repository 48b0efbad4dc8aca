# exp saves its OUTPUT (d exp(x)/dx = exp(x)). Writing that output through .data
# does not bump the version counter autograd checks, so backward runs WITHOUT error
# and silently uses the overwritten value: x.grad is 0 instead of e**3 = 20.09.
import torch

torch.manual_seed(0)
x = torch.tensor(3.0, requires_grad=True)
y = x.exp()                                  # ExpBackward0 saves y
print("y before:", round(y.item(), 4), "| y._version:", y._version)
y.data.zero_()                               # invisible to autograd: y._version stays 0
print("y after .data.zero_():", y.item(), "| y._version:", y._version)
y.backward()                                 # no error ...
print("x.grad:", x.grad.item())              # ... but 0.0 is wrong
print("correct would be:", round(torch.exp(torch.tensor(3.0)).item(), 4))
