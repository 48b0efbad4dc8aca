# expect-kind: none
# Activation checkpointing: the block's forward is recomputed during backward.
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
block = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.Sigmoid())
head = nn.Linear(8, 1)
x = torch.randn(4, 8, requires_grad=True)
h = checkpoint(block, x, use_reentrant=False)
loss = head(h).sum()
loss.backward()
print(x.grad.shape, block[0].weight.grad.norm() > 0)
