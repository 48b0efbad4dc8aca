"""MLP training loop: 128-256-10, batch 64, SGD(momentum=0.9), cross-entropy.

2,000 steps at scale 1 (steps = max(1, round(2000 * scale))).  Synthetic data
comes from a seeded generator and is created once, before the loop, so the
loop measures only forward/backward/optimizer work (the hot path a tool must
not slow down much).

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))
STEPS = max(1, round(2000 * SCALE))
BATCH = 64
N_BATCHES = 32

gen = torch.Generator().manual_seed(0)
torch.manual_seed(0)
data = torch.randn(N_BATCHES, BATCH, 128, generator=gen)
labels = torch.randint(0, 10, (N_BATCHES, BATCH), generator=gen)

model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def train():
    loss = None
    for step in range(STEPS):
        i = step % N_BATCHES
        xb, yb = data[i], labels[i]
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
    return loss.item()


final = train()
print(f"mlp_train ok steps={STEPS} loss={final:.4f}")
