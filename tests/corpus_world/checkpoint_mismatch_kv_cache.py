# source: https://github.com/pytorch/pytorch/issues/155171
# expect-kind: checkpoint-mismatch
# A checkpointed attention layer appends to a key/value cache on every call, so
# the recomputation during backward sees a sequence twice as long.
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class CachedAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.cache_k, self.cache_v = [], []

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        self.cache_k.append(k)  # <- culprit
        self.cache_v.append(v)
        keys = torch.cat(self.cache_k, dim=1)
        values = torch.cat(self.cache_v, dim=1)
        attn = (q @ keys.transpose(1, 2)).softmax(-1)
        return attn @ values


torch.manual_seed(0)
layer = CachedAttention(8)
x = torch.randn(1, 6, 8, requires_grad=True)
out = checkpoint(layer, x, use_reentrant=False)  # <- saved
out.sum().backward()  # <- backward
