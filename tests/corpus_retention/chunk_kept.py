# source: https://github.com/pytorch/pytorch/issues/95278 (a chunk of a tensor is a view of the whole)
# expect-kind: view-pins-storage
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +1,600,000 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +4,000 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
w = torch.zeros(10, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
kept = []
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    d = torch.rand(400_000)
    parts = torch.chunk(d, 400)
    kept.append(parts[0])  # CULPRIT FIX: kept.append(parts[0].clone())
    loss = (w * parts[0][:10]).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(len(kept))
