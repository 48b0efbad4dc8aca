import torch
import torch.nn as nn


class GatedBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.activation = nn.ReLU()

    def forward(self, x):
        gate = torch.sigmoid(self.fc(x))  # <- saved
        gate = self.activation(gate)  # <- culprit
        return gate * x
