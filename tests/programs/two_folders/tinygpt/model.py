import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.proj = nn.Linear(n, n)

    def forward(self, x):
        gate = torch.sigmoid(self.proj(x))
        gate.mul_(0.5)  # sigmoid saved its output for backward: this write breaks backward
        return x * gate
