# From: discuss.pytorch.org threads on forward hooks registered inside the training loop ("memory keeps
# increasing with register_forward_hook"), and Grad-CAM style feature extraction that registers a hook per
# call and never removes it: each step adds a hook whose list keeps that step's activation with its graph.
# Our own program.
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +8,192 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
# expect-kind: hook-holds-tensors
import os

import torch
import torch.nn.functional as F

def train_step(model, opt, x, y):
    acts = []
    handle = model[0].register_forward_hook(lambda m, i, o: acts.append(o))  # CULPRIT
    loss = F.cross_entropy(model(x), y) + 1e-3 * acts[0].pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    pass  # FIX: handle.remove()
    return loss.item()


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    train_step(model, opt, torch.randn(16, 32), torch.randint(0, 4, (16,)))
print("hooks on layer 0:", len(model[0]._forward_hooks))
