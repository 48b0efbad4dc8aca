"""MLP training loop: 128-256-10, batch 64, SGD(momentum=0.9), cross-entropy.

2,000 steps at scale 1 (steps = max(1, round(2000 * scale))): torch's work per step dominates, so
this is the everyday cost of a training loop. The loop is `_mlp.train`, shared with `small_mlp.py`
(the same loop with cheap steps and Adam, where the cost per recorded event shows instead).

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0).
"""
import torch

import os as _os
import sys as _sys

# the sibling module from this folder under `python -P` too, where python (and tensorscope: NOTE [python -P]
# in runner.py) leaves the script's folder off sys.path: run.py's modes of another tree use `{python} -P -m`
if _os.path.dirname(_os.path.realpath(__file__)) not in _sys.path:
    _sys.path.insert(0, _os.path.dirname(_os.path.realpath(__file__)))
from _mlp import scale, train

train("mlp_train", steps=max(1, round(2000 * scale())), sizes=(128, 256, 10), batch=64, n_batches=32,
      optimizer=lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9))
