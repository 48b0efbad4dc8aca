# source: https://github.com/akanimax/pro_gan_pytorch/pull/37
# expect-kind: none
# An EMA copy of the weights updated through .data after backward and step:
# no saved tensor is waiting for a backward any more.
import copy

import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Linear(3, 3)
ema = copy.deepcopy(net)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(3):
    loss = net(torch.randn(4, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    for p_ema, p in zip(ema.parameters(), net.parameters()):
        p_ema.data.mul_(0.9).add_(0.1 * p.data)
print("ok", loss.item())
