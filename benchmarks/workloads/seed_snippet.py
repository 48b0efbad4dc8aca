"""Seed-sized snippet: a few tensors, clone/detach/view, one backward.

Measures tensorscope's start-up cost: the work itself is negligible, so the
difference between `plain` and `tensorscope` wall times is the fixed overhead
(importing the instrumentation, patching, writing the report).

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).  The snippet is the
same at every scale (it is meant to be tiny); the scale is accepted so every
workload has the same interface.
"""
import os
import sys

import torch

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))

torch.manual_seed(0)
w = torch.randn(3, 4, requires_grad=True)
x = torch.randn(4, 2)
b = w.clone()
d = b.detach()
v = d.view(12)
v.mul_(1.0)
h = (b @ x).sigmoid()
loss = h.sum()
loss.backward()
print("seed_snippet ok", round(loss.item(), 4), tuple(w.grad.shape))
