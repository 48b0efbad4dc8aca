# From: discuss.pytorch.org "GPU memory increase ... accumulative loss" (43284) and the many evaluation loops
# run without torch.no_grad() that keep every batch's output (openillumi.com "pytorch-cuda-oom-fix-no-grad"):
# each kept output holds its batch's graph and saved activations; no backward call ever runs. Our own program.
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +100,864 B/step peak tensor memory, +5 graph nodes/step held by globals; twin +2,560 B/step, +0 nodes/step
# expect-kind: graph-kept-alive
import os

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
model.eval()
all_logits = []
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    xb = torch.randn(64, 128)
    all_logits.append(model(xb))  # CULPRIT FIX: all_logits.append(model(xb).detach())
preds = torch.cat(all_logits).argmax(1)
print("predictions", preds.shape[0], "class 0:", int((preds == 0).sum()))
