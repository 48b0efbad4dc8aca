# expect-kind: inplace-modified-saved-tensor
# expect-node: AddmmBackward0
# GAN step in the wrong order: the discriminator's optimizer updates D's weights
# in place before the generator loss, built on the same D forward, is backpropagated.
import torch
import torch.nn as nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
real = torch.randn(16, 2)
z = torch.randn(16, 2)

fake = G(z)
d_fake = D(fake)  # <- saved
d_real = D(real)
loss_d = bce(d_real, torch.ones(16, 1)) + bce(d_fake, torch.zeros(16, 1))
opt_d.zero_grad()
loss_d.backward(retain_graph=True)
opt_d.step()  # <- culprit

loss_g = bce(d_fake, torch.ones(16, 1))
opt_g.zero_grad()
loss_g.backward()  # <- backward
opt_g.step()
