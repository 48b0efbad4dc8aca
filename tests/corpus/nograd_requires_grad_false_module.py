# expect-kind: no-grad-fn
# An encoder frozen with requires_grad_(False) feeds a loss with no trainable part.
import torch
import torch.nn as nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(6, 4), nn.Tanh())
encoder.requires_grad_(False)  # <- culprit
x = torch.randn(3, 6)
target = torch.randn(3, 4)
loss = (encoder(x) - target).pow(2).mean()
loss.backward()  # <- backward
