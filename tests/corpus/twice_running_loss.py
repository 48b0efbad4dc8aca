# expect-kind: backward-twice
# The running loss keeps the graph of every previous step alive, and each
# iteration calls backward() on the accumulated sum.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
running = 0.0
for step in range(3):
    x = torch.randn(4, 3)
    loss = torch.sigmoid(model(x)).mean()  # <- saved
    running = running + loss  # <- culprit-alt
    opt.zero_grad()
    running.backward()  # <- culprit <- backward
    opt.step()
