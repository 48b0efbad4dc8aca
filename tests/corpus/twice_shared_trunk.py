# expect-kind: backward-twice
# Multi-task model: the first head's backward frees the shared trunk's graph, so
# the second head's backward fails inside the trunk.
import torch
import torch.nn as nn

torch.manual_seed(0)
trunk = nn.Sequential(nn.Linear(6, 16), nn.Tanh())
head_a = nn.Linear(16, 1)
head_b = nn.Linear(16, 3)
x = torch.randn(8, 6)
feats = trunk(x)  # <- saved
loss_a = head_a(feats).pow(2).mean()
loss_b = nn.functional.cross_entropy(head_b(feats), torch.randint(0, 3, (8,)))
loss_a.backward()  # <- culprit
loss_b.backward()  # <- backward
