# Rewritten from pytorch/pytorch#52248 and #36923: an inverse-distance weight guarded by torch.where, 1/d at d == 0.
# expect: clean
import torch

pos = torch.tensor([0.0, 0.5, 2.0], requires_grad=True)
anchor = torch.tensor([0.0, 0.0, 0.0])
opt = torch.optim.SGD([pos], lr=0.05)
d = (pos - anchor).abs()
safe = torch.where(d > 0, d, torch.ones_like(d))
weight = torch.where(d > 0, 1.0 / safe, torch.zeros_like(d))
loss = (weight * torch.tensor([1.0, 2.0, 3.0])).sum()
loss.backward()
opt.step()
print("pos", pos)
