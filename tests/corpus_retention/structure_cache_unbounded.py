# source: https://github.com/gnina/libmolgrid/issues/45 (a structure cache with no ceiling: memory grows until OOM)
# expect-kind: container-grows
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +98,304 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
scorer = torch.nn.Linear(3 * 8192, 1)
opt = torch.optim.SGD(scorer.parameters(), lr=1e-4)
cache = {}


def load_structure(key):
    if key not in cache:
        cache[key] = torch.randn(8192, 3)  # CULPRIT FIX: cache.clear(); cache[key] = torch.randn(8192, 3)
    return cache[key]


for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    coords = load_structure(f"mol{step}")
    loss = scorer(coords.reshape(1, -1)).pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(len(cache))
