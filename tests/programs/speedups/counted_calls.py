"""Aliases, copies and creations on lines past their first events (NOTE [A counted line's calls] in calls.py;
NOTE [A counted line's calls, compiled] in speedups.py): a loop of short-lived tensors, a view that fails on
the 60th pass at a line whose calls were counted (the program catches it and prints where it went: the
traceback's functions), a row of a weight kept on the 70th pass and written after the loop (a kept value that
changed), and a creation whose type changes mid-loop. Its output is python's under tensorscope, both ways."""
import os
import traceback

import torch

weight = torch.zeros(3, 8)
kept = []
total = 0.0
for i in range(80):
    a = torch.full((8,), float(i % 7))
    b = a.clone()
    b.mul_(2)
    total += float(b[1:].sum())
    c = torch.zeros(6 if i == 60 else 8, dtype=torch.float64 if i > 50 else torch.float32)
    try:
        flat = c.view(2, 4)
    except RuntimeError as e:
        frames = traceback.extract_tb(e.__traceback__)
        print(i, type(e).__name__, [(os.path.basename(f.filename), f.name) for f in frames])
    row = weight[0]
    if i == 70:
        kept.append(row)
weight.add_(1)
print(total, kept[0].sum().item(), c.dtype)
