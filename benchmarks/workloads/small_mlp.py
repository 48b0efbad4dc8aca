"""A small MLP for many steps: 32-64-10, batch 32, Adam, cross-entropy.

10,000 steps at scale 1 (steps = max(1, round(10_000 * scale))). Each step is cheap (about
0.1 ms of torch work), so what a tool adds per recorded event (Adam's in-place writes, one
backward, the optimizer's grad-mode switches) shows plainly: the per-event cost at length.
The loop is `_mlp.train`, shared with `mlp_train.py` (larger steps, SGD with momentum).

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).
"""
import os as _os
import sys as _sys

# the sibling module from this folder under `python -P` too, where python (and tensorscope: NOTE [python -P]
# in runner.py) leaves the script's folder off sys.path: run.py's modes of another tree use `{python} -P -m`
if _os.path.dirname(_os.path.realpath(__file__)) not in _sys.path:
    _sys.path.insert(0, _os.path.dirname(_os.path.realpath(__file__)))
from _mlp import SMALL_MLP, scale, train

train("small_mlp", steps=max(1, round(10_000 * scale())), **SMALL_MLP)
