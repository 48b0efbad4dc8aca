# source: https://github.com/lisa-lab/pylearn2/issues/1567 (a deepcopy of the model kept for every improvement: resident size keeps growing)
# expect-kind: container-grows
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
