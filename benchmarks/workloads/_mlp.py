"""The MLP training loop that `mlp_train.py` and `small_mlp.py` run at two sizes (not a workload itself).

Synthetic data from a seeded generator, made once before the loop, so the loop measures only
forward, backward and the optimizer (the hot path a tool must not slow down much).
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def scale() -> float:
    """The workload's size factor: argv[1] or env TS_BENCH_SCALE (float, default 1.0)."""
    return float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))


#: small_mlp's shape (small_mlp.py; benchmarks/mlp_steps.py and step_instructions.py time one of its steps)
SMALL_MLP = dict(sizes=(32, 64, 10), batch=32, n_batches=16, optimizer=lambda params: torch.optim.Adam(params, lr=1e-3))


def setup(*, sizes, batch, n_batches, optimizer):
    """(data, labels, model, optimizer) of the loop: ``Linear(sizes[0], sizes[1]), ReLU, Linear(sizes[1],
    sizes[2])``, ``n_batches`` batches of ``batch`` rows from a seeded generator, ``optimizer(parameters)``."""
    d_in, hidden, d_out = sizes
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    data = torch.randn(n_batches, batch, d_in, generator=gen)
    labels = torch.randint(0, d_out, (n_batches, batch), generator=gen)
    model = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out))
    return data, labels, model, optimizer(model.parameters())


def train(name, *, steps, sizes, batch, n_batches, optimizer):
    """Train the ``setup`` model with cross-entropy for ``steps`` steps; print one line with the final loss."""
    data, labels, model, opt = setup(sizes=sizes, batch=batch, n_batches=n_batches, optimizer=optimizer)
    loss = None
    for step in range(steps):
        i = step % n_batches
        opt.zero_grad()
        loss = F.cross_entropy(model(data[i]), labels[i])
        loss.backward()
        opt.step()
    print(f"{name} ok steps={steps} loss={loss.item():.4f}")
