import torch.nn as nn


class FusedAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.scale = dim ** -0.5

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, d).permute(2, 0, 1, 3).unbind(0)
        q *= self.scale  # <- culprit
        return (q @ k.transpose(-1, -2)).softmax(-1) @ v
