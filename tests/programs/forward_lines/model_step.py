"""A training step whose tanh output is scaled in place on the second step, before backward.

The forward lines of its graph run inside a module's forward, a helper function, a loop and a
chained expression, so every node's line is a different case.
"""
import torch
import torch.nn.functional as F


def scale(t):
    return t * 3


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        a = torch.tanh(scale(h))
        return a * 2, a


torch.manual_seed(0)
block = Block()
x = torch.randn(2, 4)
for step in range(2):
    y, a = block(x)
    loss = (y ** 2).sum() + F.softmax(y, -1)[:, 0].sum()
    if step == 1:
        a.add_(1)
    loss.backward()
