# expect-kind: none
# The in-place edit is done on a clone, so the saved sigmoid output is untouched.
import torch

torch.manual_seed(0)
x = torch.randn(5, requires_grad=True)
y = torch.sigmoid(x)
z = y.clone()
z.mul_(2.0)
z[0] = 0.0
(y * z).sum().backward()
print(x.grad)
