"""300,000 short-lived tensors: a loop making small tensors that die at once.

Each iteration makes three tensors (a factory, a clone, a slice) and writes one in place; none
outlives the next iteration. What a tool pays per tensor it sees (ids, weak references, facts)
and per wrapped call shows here. Iterations = max(1, round(100_000 * scale)).

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).
"""
import os
import sys

import torch

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))
ITERS = max(1, round(100_000 * SCALE))


def churn(n):
    total = 0.0
    for i in range(n):
        a = torch.full((8,), float(i % 7))
        b = a.clone()
        b.mul_(2)
        total += float(b[1:].sum())
    return total


print(f"short_lived ok iters={ITERS} tensors={3 * ITERS} total={churn(ITERS):.1f}")
