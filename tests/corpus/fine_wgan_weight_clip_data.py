# expect-kind: none
# WGAN weight clipping through .data AFTER backward and step: nothing saved is
# still waiting for a backward, so this is not a hazard.
import torch
import torch.nn as nn

torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.RMSprop(critic.parameters(), lr=5e-4)
for step in range(3):
    real = torch.randn(8, 2)
    fake = torch.randn(8, 2) + 1.0
    loss = critic(fake).mean() - critic(real).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    for p in critic.parameters():
        p.data.clamp_(-0.01, 0.01)
print("ok")
