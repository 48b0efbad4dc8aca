# From: discuss.pytorch.org threads on validation memory that grows with every batch ("CUDA out of memory
# in validation loop", the `total_loss += loss` answer of the PyTorch FAQ, "My model reports cuda runtime
# error(2): out of memory"), here in a validation pass that runs no backward and no torch.no_grad(). Our own program.
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +164,864 B/step peak tensor memory, +7 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
# expect-kind: graph-kept-alive
import os

import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 1))
val_loss = 0
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    x, y = torch.randn(128, 64), torch.randn(128, 1)
    val_loss += F.mse_loss(model(x), y)  # CULPRIT FIX: val_loss += F.mse_loss(model(x), y).item()
print("validation loss %.4f" % (float(val_loss) / int(os.environ.get("LEAK_STEPS", "12"))))
