# From: "distance from initialisation is always zero" reports (weights kept with detach(); our own program)
import torch

torch.manual_seed(0)
w = torch.randn(5, requires_grad=True)
init = w.detach()
ref = init.clone()
opt = torch.optim.Adam([w], lr=0.1)
for _ in range(3):
    opt.zero_grad()
    (w ** 2).sum().backward()
    opt.step()  # <- culprit
print("distance from init", (w.detach() - init).norm().item())
print("TRUTH changed=%s" % (not torch.equal(init, ref)))
