"""A GPT-2-like model (12 blocks, tiny width) whose attention scales its weights by a head mask
in place: the softmax saved its result for backward, so backward() raises the version error.

Written for the HTML report's graph test: the failing node sits deep in a graph of a few hundred
nodes, as in a real transformer.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
VOCAB, WIDTH, HEADS, BLOCKS, CONTEXT = 64, 16, 2, 12, 8


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
        self.c_proj = nn.Linear(WIDTH, WIDTH)
        self.register_buffer("causal", torch.tril(torch.ones(CONTEXT, CONTEXT, dtype=torch.bool)))

    def forward(self, x, head_mask=None):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(WIDTH, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        attn_weights = q @ k.transpose(-1, -2) / math.sqrt(c // HEADS)
        attn_weights = attn_weights.masked_fill(~self.causal[:t, :t], float("-inf"))
        attn_weights = attn_weights.softmax(dim=-1)
        if head_mask is not None:
            attn_weights *= head_mask  # <- culprit: softmax saved attn_weights for backward
        out = (attn_weights @ v).transpose(1, 2).reshape(b, t, c)
        return self.c_proj(out)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.attn = Attention()
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.c_fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.c_proj = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x, head_mask=None):
        x = x + self.attn(self.ln_1(x), head_mask)
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Embedding(CONTEXT, WIDTH)
        self.h = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.ln_f = nn.LayerNorm(WIDTH)

    def forward(self, idx, head_mask):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for i, block in enumerate(self.h):
            x = block(x, head_mask[i])
        return self.ln_f(x) @ self.wte.weight.t()


model = GPT2()
idx = torch.randint(0, VOCAB, (2, CONTEXT))
# prune the second head of block 4 only, as head pruning experiments do
head_mask = [None] * BLOCKS
head_mask[4] = torch.tensor([1.0, 0.0]).view(1, HEADS, 1, 1)
logits = model(idx, head_mask)
loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), idx[:, 1:].reshape(-1))
print(f"loss {loss.item():.4f}")
loss.backward()
