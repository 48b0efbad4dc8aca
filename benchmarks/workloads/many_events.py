"""Many events: a long loop of tiny view / in-place / slice operations.

At scale 1 this runs 350,000 iterations, each doing a view, an in-place write
and a slice on tiny tensors -- over a million tensorscope events.  Peak RSS
under tensorscope should stay near plain: the event log must be bounded
(aggregated per site), not a list of a million records.

Iterations: max(1, round(350_000 * scale)).

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).
"""
import os
import sys

import torch

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))
ITERS = max(1, round(350_000 * SCALE))

x = torch.zeros(4, 4)


def loop(n):
    for i in range(n):
        v = x.view(16)        # alias event
        v.add_(1.0)           # write event
        s = x[i % 4]          # alias (getitem) event
    return float(s.sum())


out = loop(ITERS)
print(f"many_events ok iters={ITERS} {out:.1f} {float(x.sum()):.1f}")
