# source: https://github.com/StanfordASL/neural-network-lyapunov/pull/140 (the closure's losses list kept tensors, not floats)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +4 B/step peak tensor memory, +22 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
V = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(V.parameters(), lr=0.05)
losses = []
samples = torch.randn(64, 2)


def closure():
    opt.zero_grad()
    x_next = 0.9 * samples
    loss = torch.relu(V(x_next) - V(samples) + 0.01).mean() + V(torch.zeros(1, 2)).abs().sum()
    loss.backward()
    losses.append(loss)  # CULPRIT FIX: losses.append(loss.item())
    return loss


for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    opt.step(closure)
print(len(losses))
