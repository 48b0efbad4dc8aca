"""A small regression whose loss leaves the dtype's range at one step (argv[1]: float64, float32, bfloat16 or
float16), with views of the batch taken on one line at every step (past the line's detailed events)."""
import sys

import torch

torch.manual_seed(0)
dtype = getattr(torch, sys.argv[1])
bad = int(sys.argv[2])  # the step whose batch overflows the loss (-1: none)
data = torch.randn(12, 8, 4).to(dtype)
target = torch.randn(12, 8, 1).to(dtype)
model = torch.nn.Linear(4, 1).to(dtype)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
huge = torch.finfo(dtype).max
for step in range(12):
    x, y = data[step], target[step]  # two views a step: offered to the kept values
    if step == bad:
        y = y + huge
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    if step != bad:
        opt.step()
print("done", sys.argv[1], bad)
