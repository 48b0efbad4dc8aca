"""Prints ready, then loops forever doing tensor ops (used for Ctrl-C and --timeout tests)."""
import torch

x = torch.zeros(16)
w = torch.ones(16, requires_grad=True)
print("ready", flush=True)
while True:
    x.add_(1)
    y = (x * w).sum()
    y.backward()
    w.grad = None
