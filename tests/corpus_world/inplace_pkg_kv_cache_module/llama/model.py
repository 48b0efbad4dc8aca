import torch
import torch.nn as nn


class CachedAttention(nn.Module):
    def __init__(self, dim, max_len):
        super().__init__()
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.cache_k = torch.zeros(1, max_len, dim)

    def forward(self, x, pos):
        xq, xk = self.wq(x), self.wk(x)
        self.cache_k.index_copy_(1, torch.tensor([pos]), xk)  # <- culprit
        keys = self.cache_k[:, : pos + 1]
        return xq @ keys.transpose(1, 2)  # <- saved
