# source: https://github.com/caogang/wgan-gp/issues/4
# expect-kind: no-grad-fn
# WGAN-GP: the gradient of the critic at the interpolates is taken without
# create_graph=True (switched off in the options "to save memory"), so the penalty built from it has no graph to the critic.
import torch
import torch.nn as nn

torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.Adam(critic.parameters(), lr=1e-4)
real = torch.randn(8, 2)
fake = torch.randn(8, 2)
alpha = torch.rand(8, 1)
interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
disc_interpolates = critic(interpolates)
ones = torch.ones_like(disc_interpolates)
grad_opts = {"grad_outputs": ones, "create_graph": True, "retain_graph": True}
grad_opts["create_graph"] = False  # <- culprit
gradients = torch.autograd.grad(disc_interpolates, interpolates, **grad_opts)[0]
gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * 10
opt.zero_grad()
gradient_penalty.backward()  # <- backward
opt.step()
