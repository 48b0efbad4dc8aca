# source: https://github.com/MultimediaTechLab/YOLO/pull/83 (total_loss[name] += loss_val * batch_size, a dict of tensors)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +16 B/step peak tensor memory, +11 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os
from collections import defaultdict

import torch

torch.manual_seed(0)
head = torch.nn.Conv2d(8, 6, 1)
opt = torch.optim.SGD(head.parameters(), lr=0.01)
total_loss = defaultdict(lambda: torch.tensor(0.0))
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    feats = torch.randn(4, 8, 10, 10)
    pred = head(feats)
    parts = {"box": pred[:, :4].abs().mean(), "cls": pred[:, 4:].sigmoid().mean()}
    loss = sum(parts.values())
    opt.zero_grad()
    loss.backward()
    opt.step()
    for name, loss_val in parts.items():
        total_loss[name] += loss_val * feats.shape[0]  # CULPRIT FIX: total_loss[name] += loss_val.item() * feats.shape[0]
print(sorted(total_loss))
