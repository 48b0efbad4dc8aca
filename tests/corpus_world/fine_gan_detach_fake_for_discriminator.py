# source: https://tarepan.hatenablog.com/entry/2020/10/22/143519
# expect-kind: none
# The usual GAN order: D learns on fake.detach(), steps, then G's loss runs a
# fresh D forward on the kept fake batch.
import torch
import torch.nn as nn

torch.manual_seed(0)
G, D = nn.Linear(3, 2), nn.Linear(2, 1)
opt_g = torch.optim.SGD(G.parameters(), lr=0.1)
opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
for step in range(2):
    fake = G(torch.randn(8, 3))
    loss_d = D(fake.detach()).mean() - D(torch.randn(8, 2)).mean()
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    loss_g = -D(fake).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
print("ok", loss_g.item())
