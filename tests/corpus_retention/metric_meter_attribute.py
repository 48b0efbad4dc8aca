# source: https://github.com/horovod/horovod/pull/641 (the example's Metric averaged the loss tensor itself: each batch's graph kept, OOM)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +0 B/step peak tensor memory, +8 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch
import torch.nn.functional as F


class Metric:
    def __init__(self, name):
        self.name = name
        self.sum = torch.tensor(0.0)
        self.n = torch.tensor(0.0)

    def update(self, val):
        self.sum += val  # CULPRIT FIX: self.sum += val.detach()
        self.n += 1

    @property
    def avg(self):
        return self.sum / self.n


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
train_loss = Metric("train_loss")
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    train_loss.update(loss)
print("avg loss %.3f" % train_loss.avg.item())
