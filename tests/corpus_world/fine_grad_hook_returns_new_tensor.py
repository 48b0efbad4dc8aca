# source: https://github.com/pytorch/pytorch/issues/2843
# expect-kind: none
# A tensor hook that returns a new, scaled gradient instead of writing the one
# it was given.
import torch

x = torch.ones(3, requires_grad=True)
w = torch.tensor([1.0, 2.0, 3.0])
a = x * 1
c = a.exp()
b = a * 2
b.register_hook(lambda g: g * 10)
((b + c) * w).sum().backward()
print("grad", x.grad)
