import torch.nn as nn


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def forward(self, x):
        return self.fc(x)  # <- saved

    def constrain(self, c):
        for p in self.parameters():
            p.data.clamp_(-c, c)  # <- culprit
