# source: https://github.com/ray-project/ray/pull/40940 (loss_sum += loss in the training function kept every graph)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +0 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch


def training_function(steps):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Flatten(), torch.nn.Linear(16 * 8, 50))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_sum = torch.zeros(())
    for step in range(steps):
        tokens = torch.randint(0, 50, (4, 8))
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits, tokens[:, 0])
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss_sum += loss  # CULPRIT FIX: loss_sum += loss.detach()
    return float(loss_sum) / steps


print(f"{training_function(int(os.environ.get('LEAK_STEPS', '12'))):.3f}")
