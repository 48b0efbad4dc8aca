"""A 2,000-layer model: a deep stack of small Linear layers (8 -> 8, tanh between them), SGD.

Measures how tensorscope scales with the number of parameter tensors (4,000 at scale 1: a
weight and a bias per layer): instrumentation of every initialisation write, the end-of-run
snapshot of every parameter, and the size of the report. A few training steps on a fixed
batch. Layers = max(1, round(2000 * scale)); 3 steps at every scale.

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).
"""
import os
import sys

import torch
import torch.nn as nn

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))
LAYERS = max(1, round(2000 * SCALE))
STEPS = 3

torch.manual_seed(0)
model = nn.Sequential(*[m for _ in range(LAYERS) for m in (nn.Linear(8, 8), nn.Tanh())])
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(16, 8)
target = torch.randn(16, 8)

for step in range(STEPS):
    opt.zero_grad()
    loss = ((model(x) - target) ** 2).mean()
    loss.backward()
    opt.step()

print(f"wide_model ok layers={LAYERS} parameters={len(list(model.parameters()))} loss={loss.item():.4f}")
