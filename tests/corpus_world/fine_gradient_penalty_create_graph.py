# source: https://github.com/caogang/wgan-gp/issues/4
# expect-kind: none
# WGAN-GP done right: the critic's gradient at the interpolates is taken with
# create_graph=True, so the penalty trains the critic.
import torch
import torch.nn as nn

torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.5, 0.9))
for it in range(3):
    real = torch.randn(8, 2) + 2
    fake = torch.randn(8, 2)
    alpha = torch.rand(8, 1)
    interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    disc_interpolates = critic(interpolates)
    ones = torch.ones_like(disc_interpolates)
    gradients = torch.autograd.grad(disc_interpolates, interpolates, grad_outputs=ones, create_graph=True, retain_graph=True)[0]
    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * 10
    d_cost = critic(fake).mean() - critic(real).mean() + gradient_penalty
    opt.zero_grad()
    d_cost.backward()
    opt.step()
print("d_cost", round(d_cost.item(), 4))
