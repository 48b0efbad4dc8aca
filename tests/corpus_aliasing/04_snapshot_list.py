# From: "all my saved weight snapshots are identical" (list of detached parameters; our own program)
import torch

torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(4))
opt = torch.optim.SGD([w], lr=0.1)
snaps, refs = [], []
for step in range(3):
    opt.zero_grad()
    (w * torch.arange(4.0)).sum().backward()
    opt.step()  # <- culprit
    snaps.append(w.detach())
    refs.append(w.detach().clone())
print("first == last:", torch.equal(snaps[0], snaps[-1]))
print("TRUTH changed=%s" % (not torch.equal(snaps[0], refs[0])))
