# Rewritten from pytorch/pytorch#92260 and #65811: fitting a Beta to proportions that include exactly 0 and 1.
# expect: clean
import torch
from torch.distributions import Beta

props = torch.tensor([0.2, 0.5, 0.0, 0.7, 1.0])
log_a = torch.zeros((), requires_grad=True)
log_b = torch.zeros((), requires_grad=True)
opt = torch.optim.Adam([log_a, log_b], lr=0.1)
for step in range(3):
    dist = Beta(log_a.exp() + 1.0, log_b.exp() + 1.0)
    loss = -dist.log_prob(props.clamp(1e-4, 1 - 1e-4)).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, loss.item())
