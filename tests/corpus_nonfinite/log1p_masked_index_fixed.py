# Rewritten from pytorch/pytorch#152088: log1p of every entry, then the entries above -1 kept by a mask.
# expect: clean
import torch

a = torch.tensor([-1.0, 0.5, 1.0], requires_grad=True)
opt = torch.optim.SGD([a], lr=0.1)
keep = a > -1
l = torch.log1p(a[keep]).sum()
l.backward()
opt.step()
print("a", a)
