# source: https://github.com/BatsResearch/labelmodels/issues/4 (running_loss += loss keeps each batch's graph)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +0 B/step peak tensor memory, +7 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
running_loss = 0.0
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    x, y = torch.randn(16, 32), torch.randn(16, 1)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    running_loss += loss  # CULPRIT FIX: running_loss += loss.item()
print(f"mean loss {float(running_loss) / (step + 1):.4f}")
