# source: https://github.com/alexhernandezgarcia/gflownet/pull/133 (running averages of the loss kept as tensors with their graph)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +16 B/step peak tensor memory, +11 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
policy = torch.nn.Sequential(torch.nn.Linear(12, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
ema = {"terminal": torch.tensor(0.0), "nonterminal": torch.tensor(0.0)}
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    states = torch.randn(32, 12)
    logits = policy(states)
    terminal = logits[:, 0].pow(2).mean()
    nonterminal = logits[:, 1:].pow(2).mean()
    loss = terminal + nonterminal
    opt.zero_grad()
    loss.backward()
    opt.step()
    ema["terminal"] = 0.9 * ema["terminal"] + 0.1 * terminal  # CULPRIT FIX: ema["terminal"] = 0.9 * ema["terminal"] + 0.1 * terminal.item()
print({k: round(float(v), 3) for k, v in ema.items()})
