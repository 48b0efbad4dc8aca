# Twin of 04: each snapshot cloned
import torch

torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(4))
opt = torch.optim.SGD([w], lr=0.1)
snaps, refs = [], []
for step in range(3):
    opt.zero_grad()
    (w * torch.arange(4.0)).sum().backward()
    opt.step()
    snaps.append(w.detach().clone())
    refs.append(w.detach().clone())
print("first == last:", torch.equal(snaps[0], snaps[-1]))
print("TRUTH changed=%s" % (not torch.equal(snaps[0], refs[0])))
