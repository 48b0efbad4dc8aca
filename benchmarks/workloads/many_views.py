"""20,000 live tensors of four kinds: 5,000 parameters (2,500 Linear(8, 8)), SGD's momentum buffer of each, and a
row view of each parameter through ``detach()`` (the detached tensor and the view are both alive).

The report's size at 20,000 tensors (issue 22's "under 4 MB, with --full keeping everything") where every view
has a base of its own: the worst case of the compact form's tensor kinds, which a view's base once split (one
kind per view). Layers = max(1, round(2_500 * scale)); 2 steps at every scale.

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).
"""
import os
import sys

import torch
import torch.nn as nn

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))
LAYERS = max(1, round(2_500 * SCALE))

torch.manual_seed(0)
layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(LAYERS))
opt = torch.optim.SGD(layers.parameters(), lr=1e-3, momentum=0.9)
x = torch.randn(4, 8)
for step in range(2):
    opt.zero_grad()
    loss = sum((layer(x) ** 2).mean() for layer in layers)
    loss.backward()
    opt.step()
rows = [p.detach()[0] for p in layers.parameters()]  # a view of each parameter's first row
print(f"many_views ok layers={LAYERS} parameters={2 * LAYERS} views={len(rows)} loss={loss.item():.4f}")
