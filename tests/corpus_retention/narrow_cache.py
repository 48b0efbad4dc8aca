# source: https://github.com/pytorch/pytorch/issues/44872 (a narrowed tensor keeps the mother tensor)
# expect-kind: view-pins-storage
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +2,560,000 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +640 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
proj = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(proj.parameters(), lr=0.01)
heads = {}
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    x = torch.randint(0, 100, size=(40000, 8), dtype=torch.long)
    heads[step] = x.narrow(dim=0, start=0, length=10)  # CULPRIT FIX: heads[step] = x.narrow(dim=0, start=0, length=10).clone()
    loss = proj(heads[step].float()).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(len(heads))
