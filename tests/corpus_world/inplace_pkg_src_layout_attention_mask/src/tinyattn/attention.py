import torch.nn as nn


class CrossAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.to_q = nn.Linear(dim, dim)
        self.to_kv = nn.Linear(dim, 2 * dim)

    def forward(self, x, media, mask):
        q = self.to_q(x)
        k, v = self.to_kv(media).chunk(2, dim=-1)
        attn = (q @ k.transpose(-1, -2)).softmax(dim=-1)  # <- saved
        attn.masked_fill_(mask, 0.0)  # <- culprit
        return attn @ v
