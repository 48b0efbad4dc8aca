# source: https://github.com/pnnl/neuromancer/pull/292 (the Trainer stored its metrics without detaching them: hundreds of MB of graph per run)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +12 B/step peak tensor memory, +22 graph nodes/step held by globals; twin +12 B/step, +0 nodes/step
import os
from collections import defaultdict

import torch


def step_metrics(model, batch):
    pred = model(batch["x"])
    mse = (pred - batch["y"]).pow(2).mean()
    reg = sum(p.pow(2).sum() for p in model.parameters())
    return {"loss": mse + 1e-4 * reg, "mse": mse, "reg": reg}


class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.history = defaultdict(list)

    def train(self, steps):
        for _ in range(steps):
            batch = {"x": torch.randn(32, 20), "y": torch.randn(32, 1)}
            out = step_metrics(self.model, batch)
            self.opt.zero_grad()
            out["loss"].backward()
            self.opt.step()
            for k, v in out.items():
                self.history[k].append(v)  # CULPRIT FIX: self.history[k].append(v.detach())


torch.manual_seed(0)
trainer = Trainer(torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)))
trainer.train(int(os.environ.get("LEAK_STEPS", "12")))
print(len(trainer.history["loss"]))
