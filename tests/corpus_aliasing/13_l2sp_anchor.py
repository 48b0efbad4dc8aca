# From: L2-SP / "stay close to the pretrained weights" penalty that is always zero (our own program)
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 1))
anchor = [p.detach() for p in model.parameters()]
refs = [a.clone() for a in anchor]
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 3)
for _ in range(2):
    penalty = sum(((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchor))
    loss = model(x).pow(2).mean() + penalty
    opt.zero_grad()
    loss.backward()
    opt.step()  # <- culprit
print("penalty", penalty.item())
print("TRUTH changed=%s" % any(not torch.equal(a, r) for a, r in zip(anchor, refs)))
