# Handled on purpose: the double-where trick keeps sqrt's unselected branch away from 0 and negatives.
# expect: clean
import torch

x = torch.tensor([-1.0, 0.0, 4.0], requires_grad=True)
safe = torch.where(x > 0, x, torch.ones_like(x))
y = torch.where(x > 0, torch.sqrt(safe), x)
y.sum().backward()
print("grad", x.grad)
