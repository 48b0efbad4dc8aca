import torch.nn as nn


class CrossAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.to_q = nn.Linear(dim, dim)
        self.to_kv = nn.Linear(dim, 2 * dim)

    def forward(self, x, media, mask):
        q = self.to_q(x)
        k, v = self.to_kv(media).chunk(2, dim=-1)
        sim = (q @ k.transpose(-1, -2)).masked_fill(mask, float("-inf"))
        return sim.softmax(dim=-1) @ v
