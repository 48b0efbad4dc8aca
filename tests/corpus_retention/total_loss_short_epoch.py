# source: https://github.com/pytorch/examples/blob/main/mnist/main.py (train() per epoch, with total_loss += loss: each epoch's graphs kept)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, a line tracer reading train()'s total_loss at each step): 0, 11, 18, 25 graph nodes held at steps 1-4 of every epoch (+7 per step, reset each epoch); twin: 0
import os

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
batches = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(4)]  # a short epoch: 4 steps


def train(epoch):
    total_loss = 0
    for x, y in batches:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total_loss += loss  # CULPRIT FIX: total_loss += loss.item()
    return total_loss / len(batches)


for epoch in range(int(os.environ.get("LEAK_STEPS", "12"))):
    mean = train(epoch)
print(f"mean loss {mean:.4f}")
