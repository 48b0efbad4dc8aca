"""Memory churn: allocate and free 150 tensors of 8 MB each, one or two at a time.

Each tensor is filled, a view is taken, an in-place op is applied and a
reduction is computed, then it is dropped.  The program never holds more than
two 8 MB tensors at once, so plain peak RSS stays small; a tool that keeps
tensors (or their storages) alive shows up as hundreds of MB of extra peak RSS.

Count: max(1, round(150 * scale)) tensors; the size stays 8 MB at every scale
(so a tiny-scale run still exercises the allocation path).

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).
"""
import os
import sys

import torch

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))
COUNT = max(1, round(150 * SCALE))
NUMEL = 8 * 1024 * 1024 // 4  # 8 MB of float32


def churn(n):
    total = 0.0
    prev = None
    for i in range(n):
        t = torch.empty(NUMEL)
        t.fill_(float(i % 5))            # fill (touches every page)
        v = t.view(1024, -1)             # a view
        v[0].mul_(2.0)                   # in-place op through the view
        total += float(v.sum())          # reduction
        prev = t                         # keep at most two alive (t and prev)
        del t, v
    del prev
    return total


result = churn(COUNT)
print(f"memory_churn ok count={COUNT} total={result:.1f}")
