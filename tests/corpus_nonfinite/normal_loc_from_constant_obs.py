# Rewritten from lupinjia/LeggedGym-Ex#12 and WanluLiuLab/scAtlasVAE#16: "Expected parameter loc ... of distribution
# Normal ... but found invalid values: nan" when observations are standardised by a std that is 0 for a constant one.
# expect: kind=non-finite-value line=11 op=div phase=forward sink=none
import torch
from torch.distributions import Normal

torch.manual_seed(0)
obs = torch.tensor([[0.5, 1.0, 3.0], [0.1, 1.0, 2.0], [0.9, 1.0, 2.5], [0.3, 1.0, 1.0]])
policy = torch.nn.Linear(3, 2)
std = obs.std(dim=0)
obs_n = (obs - obs.mean(dim=0)) / std
mean = policy(obs_n)
dist = Normal(mean, torch.ones_like(mean) * 0.5)
action = dist.sample()
print("action", action)
