# source: https://discuss.pytorch.org/t/can-not-create-a-new-calculation-graph-after-the-backward-propagation/45026
# expect-kind: backward-twice
# expect-node: TanhBackward0
# Shared CNN/LSTM-like features feed a DQN head and an actor head; the DQN loss
# is backpropagated first, then the actor loss walks into the freed encoder.
import torch
import torch.nn as nn

torch.manual_seed(0)
encoder = nn.Linear(6, 8)
dqn_head = nn.Linear(8, 3)
actor_head = nn.Linear(8, 2)
state = torch.randn(4, 6)
feat = torch.tanh(encoder(state))  # <- saved
loss_dqn = dqn_head(feat).pow(2).mean()
loss_dqn.backward()  # <- culprit
loss_actor = -actor_head(feat).mean()  # <- culprit-alt
loss_actor.backward()  # <- backward
