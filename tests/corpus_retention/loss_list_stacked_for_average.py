# source: karpathy/makemore with its loss log kept as tensors for a running average (the "memory grows every iteration, list append" reports, e.g. https://github.com/BatsResearch/labelmodels/issues/4); our own program
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +4 B/step peak tensor memory, +6 graph nodes/step held by globals; twin +4 B/step, +0 nodes/step; with `.item()` instead, torch.stack raises TypeError at step 0
import os

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(27, 16), torch.nn.Flatten(), torch.nn.Linear(48, 27))
opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
recent_losses = []
for step in range(int(os.environ.get("LEAK_STEPS", "40"))):
    x, y = torch.randint(0, 27, (8, 3)), torch.randint(0, 27, (8,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    recent_losses.append(loss)  # CULPRIT FIX: recent_losses.append(loss.detach())
    if step % 10 == 0:
        print(f"step {step} | loss {loss.item():.4f} | avg {torch.stack(recent_losses).mean().item():.4f}")
