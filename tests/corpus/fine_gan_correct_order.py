# expect-kind: none
# A GAN step in the right order: D is trained on fake.detach(), and the
# generator's loss uses a fresh D forward pass after opt_d.step().
import torch
import torch.nn as nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
for step in range(3):
    real = torch.randn(16, 2)
    fake = G(torch.randn(16, 2))
    loss_d = bce(D(real), torch.ones(16, 1)) + bce(D(fake.detach()), torch.zeros(16, 1))
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    loss_g = bce(D(fake), torch.ones(16, 1))
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
print("ok")
