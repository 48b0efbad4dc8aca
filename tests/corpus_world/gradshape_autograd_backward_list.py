# source: https://github.com/ChenRocks/fast_abs_rl/issues/73
# expect-kind: gradient-shape-mismatch
# The RL step back-propagates the critic loss and the policy losses together with
# one gradient of shape [1] each, but the losses are 0-dimensional tensors.
import torch
import torch.nn as nn
from torch import autograd

torch.manual_seed(0)
actor = nn.Linear(5, 4)
critic = nn.Linear(5, 1)
state = torch.randn(3, 5)
logp = actor(state).log_softmax(-1)[:, 0]
baseline = critic(state).squeeze(1)
reward = torch.randn(3)
critic_loss = nn.functional.mse_loss(baseline, reward)
losses = [-(lp * (r - b.detach())) for lp, r, b in zip(logp, reward, baseline)]
grads = [torch.ones(1)] * (1 + len(losses))  # <- culprit-alt
autograd.backward([critic_loss] + losses, grads)  # <- culprit <- backward
