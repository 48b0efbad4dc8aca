# source: https://github.com/pytorch/pytorch/issues/13613 (predictions gathered with torch.cat every batch: memory grows until OOM)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +896 B/step peak tensor memory, +6 graph nodes/step held by globals; twin +896 B/step, +0 nodes/step
import os

import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
all_logits = torch.empty(0, 10)
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    all_logits = torch.cat([all_logits, logits])  # CULPRIT FIX: all_logits = torch.cat([all_logits, logits.detach()])
print(tuple(all_logits.shape))
