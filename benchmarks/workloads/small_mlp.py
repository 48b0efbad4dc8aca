"""A small MLP for many steps: 32-64-10, batch 32, Adam, cross-entropy.

10,000 steps at scale 1 (steps = max(1, round(10_000 * scale))). Each step is cheap (about
0.1 ms of torch work), so what a tool adds per recorded event (Adam's in-place writes, one
backward, the optimizer's grad-mode switches) shows plainly: the per-event cost at length.
Synthetic data from a seeded generator, made once before the loop.

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))
STEPS = max(1, round(10_000 * SCALE))
BATCH = 32
N_BATCHES = 16

gen = torch.Generator().manual_seed(0)
torch.manual_seed(0)
data = torch.randn(N_BATCHES, BATCH, 32, generator=gen)
labels = torch.randint(0, 10, (N_BATCHES, BATCH), generator=gen)

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)


def train():
    loss = None
    for step in range(STEPS):
        i = step % N_BATCHES
        opt.zero_grad()
        loss = F.cross_entropy(model(data[i]), labels[i])
        loss.backward()
        opt.step()
    return loss.item()


final = train()
print(f"small_mlp ok steps={STEPS} loss={final:.4f}")
