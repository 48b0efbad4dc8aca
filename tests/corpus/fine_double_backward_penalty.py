# expect-kind: none
# A WGAN-GP style gradient penalty: autograd.grad with create_graph=True, then
# backward through the penalty (double backward).
import torch
import torch.nn as nn

torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
real = torch.randn(8, 2)
fake = torch.randn(8, 2)
alpha = torch.rand(8, 1)
mix = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
score = critic(mix)
(g,) = torch.autograd.grad(score.sum(), mix, create_graph=True)
penalty = ((g.norm(dim=1) - 1) ** 2).mean()
loss = critic(fake).mean() - critic(real).mean() + 10 * penalty
loss.backward()
print(critic[0].weight.grad.norm() > 0)
