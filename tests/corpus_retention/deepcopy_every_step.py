# source: https://github.com/lisa-lab/pylearn2/issues/1567 (a deepcopy of the model kept for every improvement: resident size keeps growing)
# expect-kind: container-grows
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +271,392 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import copy
import os

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
best_models = []
best = float("inf")
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    x = torch.randn(16, 256)
    loss = model(x).pow(2).mean() + 1.0 / (step + 1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if loss.item() < best:
        best = loss.item()
        best_models.append(copy.deepcopy(model))  # CULPRIT FIX: best_models[:] = [copy.deepcopy(model)]
print(len(best_models))
