# source: https://github.com/Kim-Hammar/gym-idsgame/issues/10
# expect-kind: other
# The environment wrapper appends 14 new features to the observation (44) but
# the Q-network was built for the old observation size (30).
import torch
import torch.nn as nn

torch.manual_seed(0)
obs_dim = 30
q_net = nn.Sequential(nn.Linear(obs_dim, 64), nn.ReLU(), nn.Linear(64, 4))
obs = torch.randn(1, obs_dim)
obs = torch.cat([obs, torch.randn(1, 14)], dim=1)  # <- culprit
q = q_net(obs)  # <- culprit-alt
action = q.argmax(dim=1)
loss = (q.gather(1, action.unsqueeze(1)) - 1.0).pow(2).mean()
loss.backward()
