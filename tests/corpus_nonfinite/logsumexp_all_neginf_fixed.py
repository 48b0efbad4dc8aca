# Rewritten from pytorch/pytorch#31829: a log-space forward pass (CTC-like) where one state has no allowed path.
# expect: clean
import torch

emit = torch.tensor([[0.0, -1.0, -0.2], [-0.5, -2.0, -0.1]], requires_grad=True)
allowed = torch.tensor([[True, False, True], [True, False, False]])
opt = torch.optim.SGD([emit], lr=0.1)
for step in range(2):
    opt.zero_grad()
    x = emit.masked_fill(~allowed, torch.finfo(torch.float32).min)
    total = torch.logsumexp(x, dim=0)
    loss = -total.sum()
    loss.backward()
    opt.step()
    print(step, loss.item())
