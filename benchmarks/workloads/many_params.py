"""5,000 parameter tensors: 2,500 Linear(8, 8) layers in a ModuleList, one Adam step.

How the cost of tensorscope scales with the number of parameters (memory above all): every
initialisation write, Adam's state (two more tensors per parameter: 15,000 tensors alive with the
parameters and 20,000 with the gradients), the end-of-run snapshot of each, and the size of the
report. Layers = max(1, round(2_500 * scale)); 2 steps at every scale.

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).
"""
import os
import sys

import torch
import torch.nn as nn

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))
LAYERS = max(1, round(2_500 * SCALE))
STEPS = 2

torch.manual_seed(0)
layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(LAYERS))
opt = torch.optim.Adam(layers.parameters(), lr=1e-3)
x = torch.randn(4, 8)

for step in range(STEPS):
    opt.zero_grad()
    loss = sum((layer(x) ** 2).mean() for layer in layers)
    loss.backward()
    opt.step()
print(f"many_params ok layers={LAYERS} parameters={2 * LAYERS} loss={loss.item():.4f}")
