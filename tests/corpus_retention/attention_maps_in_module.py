# source: https://github.com/tsugumi-sys/SA-ConvLSTM-Pytorch/pull/31 (attention maps saved on every forward even when not asked for)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +9,216 B/step peak tensor memory, +17 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch


class SelfAttention(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.attention_maps = []

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        attn = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        self.attention_maps.append(attn)  # CULPRIT FIX: self.last_attention_map = attn.detach()
        return attn @ v


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), SelfAttention(16), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    x, y = torch.randn(4, 24, 8), torch.randn(4, 24, 1)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
