"""What one step of the ``small_mlp`` workload costs under `tensorscope run`'s recording, part by part, in-process.

Usage::

    python benchmarks/mlp_steps.py STEPS ROUNDS MODE...

The step is ``small_mlp``'s (a 32-64-10 MLP, batch 32, Adam: ``zero_grad``, two views of the data, a
forward, cross-entropy, ``backward``, ``opt.step()``), run ``STEPS`` times per mode per round, the modes
interleaved. MODE is ``plain`` (no wrappers), ``off`` (the wrappers installed, the recorder inactive),
``full`` (what ``run`` records), ``barewrite`` (in-place writes not recorded: the wrapper's bare call),
``nowhole`` (optimizer steps recorded write by write, not whole), ``noalias`` (aliases and copies not
recorded), ``nobackward`` (backward calls not recorded), ``nostephooks`` (the optimizer-step hooks
return at once) or ``nosinks`` (the non-finite checks of the loss and the parameters skipped, as after a
sink was found). Prints the minimum CPU time per step of each mode, what it adds over ``plain`` and
that per event (``EVENTS`` a step: Adam's 24 writes, 2 views, 1 backward). Growth samples are off (they
are measured by growth's own ``seconds``). Run from the repository root with one torch thread.
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads"))
from _mlp import SMALL_MLP, setup  # noqa: E402

from tensorscope.instrument import session  # noqa: E402
from tensorscope.instrument import tracker as trk

EVENTS = 27
torch.set_num_threads(1)
data, labels, model, opt = setup(**SMALL_MLP)  # small_mlp's own (benchmarks/workloads/_mlp.py)
pt = time.process_time


def steps(n):
    start = pt()
    for step in range(n):
        i = step % 16
        opt.zero_grad()
        loss = F.cross_entropy(model(data[i]), labels[i])
        loss.backward()
        opt.step()
    return (pt() - start) / n


def _bare(orig, op, args, kwargs, *rest):
    return orig(*args, **kwargs)


def _none(*args, **kwargs):
    return None


def main(n, rounds, modes):
    T = trk.Tracker
    tr = session.new_tracker(__file__)
    tr.growth.enabled = False
    full_write = tr.write_call
    started, finished = tr.steps.started, tr.steps.finished
    orig = {"on_alias": T.on_alias, "on_copy": T.on_copy}
    res = {m: [] for m in modes}
    steps(20)
    with session.active(tr):
        steps(60)  # the detailed events of every line used up, as in a long run
    for _ in range(rounds):
        for m in modes:
            if m == "plain":
                res[m].append(steps(n))
                continue
            with session.active(tr):
                tr.active = m != "off"
                tr.write_call = _bare if m == "barewrite" else full_write
                tr.steps.started = _none if m in ("nowhole", "nostephooks") else started
                tr.steps.finished = _none if m == "nostephooks" else finished
                if m == "noalias":
                    T.on_alias = T.on_copy = _none
                bc = tr.backward_calls.before
                if m == "nosinks":
                    tr.values.sink = {}
                if m == "nobackward":
                    tr.backward_calls.before = _none
                try:
                    res[m].append(steps(n))
                finally:
                    T.on_alias, T.on_copy = orig["on_alias"], orig["on_copy"]
                    tr.backward_calls.before = bc
                    tr.values.sink = None
                    tr.write_call = full_write
                    tr.steps.started, tr.steps.finished = started, finished
    base = min(res["plain"]) if "plain" in res else None
    print(f"{'mode':12s} {'us/step':>9s} {'over plain':>11s} {'us/event':>9s}")
    for m, v in res.items():
        best = min(v) * 1e6
        over = best - base * 1e6 if base is not None else float("nan")
        print(f"{m:12s} {best:9.1f} {over:11.1f} {over / EVENTS:9.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:] or ["plain", "off", "full"])
