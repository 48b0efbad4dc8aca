# source: https://github.com/microsoft/InnerEye-DeepLearning/pull/209 (model outputs persisted across epochs run out of memory)
# expect-kind: container-grows
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +131,072 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
model = torch.nn.Conv3d(1, 2, 3, padding=1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
epoch_outputs = []
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    volume = torch.randn(1, 1, 16, 32, 32)
    logits = model(volume)
    loss = logits.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    epoch_outputs.append(logits.detach())  # CULPRIT FIX: epoch_outputs[:] = [logits.detach()]
print(len(epoch_outputs))
