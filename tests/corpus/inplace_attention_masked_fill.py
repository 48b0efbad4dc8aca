# expect-kind: inplace-modified-saved-tensor
# expect-alias: attn
# expect-node: SoftmaxBackward0
# Attention weights are masked in place after the softmax that saved them.
import torch
import torch.nn as nn


class TinyAttention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, pad_mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        attn = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1)  # <- saved
        attn.masked_fill_(pad_mask, 0.0)  # <- culprit
        return attn @ v


torch.manual_seed(0)
layer = TinyAttention(4)
x = torch.randn(2, 5, 4)
pad_mask = torch.zeros(2, 5, 5, dtype=torch.bool)
pad_mask[:, :, -1] = True
out = layer(x, pad_mask)
out.sum().backward()  # <- backward
