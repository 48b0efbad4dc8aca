# expect-kind: inplace-modified-saved-tensor
# expect-alias: a
# expect-node: SigmoidBackward0
# A squeeze-and-excitation style gate scaled in place inside forward().
import torch
import torch.nn as nn


class SEGate(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.scale = 2.0

    def forward(self, x):
        a = torch.sigmoid(self.fc(x))  # <- saved
        a *= self.scale  # <- culprit
        return x * a


torch.manual_seed(0)
gate = SEGate(6)
x = torch.randn(3, 6)
loss = gate(x).sum()
loss.backward()  # <- backward
