"""How many Python calls tensorscope's recording makes in one step of ``small_mlp`` and one iteration of
``short_lived``, in process: a figure the machine's load does not move.

Usage::

    python benchmarks/call_counts.py

A profile function (``sys.setprofile``) counts the calls into functions of tensorscope's files and the C
functions called from them, over 100 steps and 1,000 iterations past the lines' first events (as in a long
run). Compare two trees by running this file with each on ``PYTHONPATH``. Run from the repository root.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from tensorscope.instrument import session

torch.manual_seed(0)
data = torch.randn(16, 32, 32)
labels = torch.randint(0, 10, (16, 32))
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
counts = {"python": 0, "c": 0}


def profile(frame, event, arg):
    if "tensorscope" in frame.f_code.co_filename:
        if event == "call":
            counts["python"] += 1
        elif event == "c_call":
            counts["c"] += 1


def churn(n):  # short_lived's iteration
    total = 0.0
    for i in range(n):
        a = torch.full((8,), float(i % 7))
        b = a.clone()
        b.mul_(2)
        total += float(b[1:].sum())
    return total


def counted(what, fn, n):
    counts.update(python=0, c=0)
    sys.setprofile(profile)
    try:
        fn(n)
    finally:
        sys.setprofile(None)
    print(f"{what}: {counts['python'] / n:.1f} Python calls into tensorscope, {counts['c'] / n:.1f} C calls from it")


tracker = session.new_tracker(__file__)
tracker.growth.enabled = False
with session.active(tracker):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def steps(n):
        for s in range(n):
            opt.zero_grad()
            loss = F.cross_entropy(model(data[s % 16]), labels[s % 16])
            loss.backward()
            opt.step()

    steps(50)
    churn(100)
    counted("small_mlp step", steps, 100)
    counted("short_lived iteration", churn, 1000)
