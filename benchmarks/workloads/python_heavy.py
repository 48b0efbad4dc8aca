"""Python-heavy workload: many tiny tensor ops where interpreter overhead dominates.

3,000 iterations at scale 1 (iters = max(1, round(3000 * scale))), half at
module level and half inside a function, each doing views, slicing,
`x[i] = ...`, `+=`, `.detach()` and in-place writes on small tensors.  This is
the worst case for per-op instrumentation (patched Tensor methods, frame
lookups).

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).
"""
import os
import sys

import torch

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))
ITERS = max(1, round(3000 * SCALE))
HALF = max(1, ITERS // 2)

torch.manual_seed(0)

# --- module level -------------------------------------------------------
x = torch.zeros(16, 8)
acc = torch.zeros(8)
w = torch.randn(8, requires_grad=True)
for i in range(HALF):
    r = i % 16
    row = x[r]                 # getitem view
    row += 1.0                 # in-place through the view (iadd)
    x[(r + 1) % 16] = row * 0.5  # setitem
    v = x.view(128)            # view
    s = v[r:r + 8]             # slice
    s.mul_(0.99)               # in-place write on a slice
    d = s.detach()             # detach (shares storage and version counter)
    acc.add_(d)
    t = x.t()                  # transpose view
    acc += t[r % 8, :8]
    if i % 100 == 0:
        y = (w * acc).sum()
        y.backward()
        acc.zero_()
module_total = float(x.sum())


# --- inside a function --------------------------------------------------
def inner(n):
    a = torch.ones(32)
    b = a.view(4, 8)
    total = torch.zeros(())
    for i in range(n):
        c = b[i % 4]
        c.add_(0.001)
        a[i % 32] = float(i % 7)
        part = a[2:10].clone()
        part += 1
        e = part.detach()
        e.clamp_(max=5.0)
        b[:, 1:3].fill_(0.5)
        total += e.sum()
    return float(total)


func_total = inner(ITERS - HALF)
print(f"python_heavy ok iters={ITERS} {module_total:.3f} {func_total:.3f}")
