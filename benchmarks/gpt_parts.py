"""Where `tensorscope run`'s time goes in the GPT workload's steps, part by part, in process, as a run builds it.

Usage::

    python benchmarks/gpt_parts.py [STEPS]

One process: a fresh tracker is made and switched on *before* the workload's model and optimizer are
built (as under ``tensorscope run``, so its parameters, the weight tying, the buffers' views and the
optimizer state are seen being made), then ``train()`` runs one step at a time (``STEPS = 1``, default
40 calls). Prints, for steps 2 to 20 (each line's first 20 events recorded in detail, growth samples at
boundaries 2 to 6, 8 and 16 and the windows after them) and for steps 21 to the end, the CPU time per step
and the CPU time per step spent in each recorder part (both ``time.process_time``: on a loaded machine
wall time is mostly waiting for a core): growth samples
(``Growth.boundary``), an optimizer step's logging (``OptimizerSteps.log``), ``_foreach_`` writes outside
a step (``foreach_writes.write_many``), aliases and copies (``Tracker.on_alias``/``on_copy``). The parts
are timed by wrapping them, which adds a little; ``OptimizerSteps.started`` is never wrapped (it finds
the step's frame two frames up). Compare with ``benchmarks/gpt_steps.py`` (steady state against plain).
Run from the repository root.
"""
import os
import sys
import time

import torch

torch.set_num_threads(1)
from tensorscope.instrument import foreach_writes as fw, growth as gm, optimizer_steps as osm, session, tracker as tk

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 40
spent: dict = {}


def timed(owner, name, label):
    f = getattr(owner, name)

    def wrapper(*args, **kwargs):
        t = time.process_time()
        try:
            return f(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.process_time() - t
    setattr(owner, name, wrapper)


timed(gm.Growth, "boundary", "growth samples")
timed(osm.OptimizerSteps, "log", "optimizer step log")
timed(fw, "write_many", "foreach writes")
timed(tk.Tracker, "on_alias", "aliases")
timed(tk.Tracker, "on_copy", "copies")
path = os.path.abspath("benchmarks/workloads/gpt_train.py")
src = open(path).read()
code = compile(src[:src.index("final = train()")], path, "exec")
sys.argv = [path]
g = {"__name__": "__main__", "__file__": path}
tracker = session.new_tracker(path)
with session.active(tracker):
    exec(code, g)
    g["STEPS"] = 1
    for i in range(STEPS):
        if i in (1, 20):
            spent.clear()
            t0 = time.process_time()
        g["train"]()
        if i in (19, STEPS - 1) and i >= 1:
            n = i - (1 if i == 19 else 20) + 1
            parts = "  ".join(f"{k} {v * 1000 / n:.2f}" for k, v in sorted(spent.items(), key=lambda kv: -kv[1]))
            print(f"steps {2 if i == 19 else 21:2d}-{i + 1:2d}: CPU {(time.process_time() - t0) * 1000 / n:6.2f} ms a step;"
                  f" CPU ms a step in: {parts}")
print(f"steps recorded whole: {tracker.steps.whole}; growth samples: {len(tracker.growth.samples)}")
