"""gpt_infer (leak14): the GPT of gpt_train.py (imported from it) run for inference only, twice
gpt_train's steps (no backward: the case NOTE [Steps without backward] in
tensorscope/instrument/growth.py samples at top-level module calls). The model is also reachable as
`raw_model`, as in gpt_train.

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0). Device: env TS_BENCH_DEVICE (default
"cpu"). With env TS_BENCH_LOOP=PATH (benchmarks/run.py sets it), the CPU time of the steps after the
first (``time.process_time``) is written to PATH as JSON: the loop alone, without start-up and exit.
"""
import json
import os
import time

import torch

import os as _os
import sys as _sys

# the sibling module from this folder under `python -P` too, where python (and tensorscope: NOTE [python -P]
# in runner.py) leaves the script's folder off sys.path: run.py's modes of another tree use `{python} -P -m`
if _os.path.dirname(_os.path.realpath(__file__)) not in _sys.path:
    _sys.path.insert(0, _os.path.dirname(_os.path.realpath(__file__)))
from gpt_train import BATCH, CONTEXT, DEVICE, GPT, STEPS, VOCAB

torch.manual_seed(0)
gen = torch.Generator().manual_seed(0)
stream = torch.randint(0, VOCAB, (16, BATCH, CONTEXT + 1), generator=gen).to(DEVICE)

model = GPT().to(DEVICE)
raw_model = model


def infer():
    total = 0.0
    t0 = None
    with torch.no_grad():
        for step in range(STEPS * 2):
            if step == 1:
                t0 = time.process_time()
            batch = stream[step % len(stream)]
            total += float(model(batch[:, :-1], batch[:, 1:]))
    if t0 is not None and os.environ.get("TS_BENCH_LOOP"):
        with open(os.environ["TS_BENCH_LOOP"], "w") as fh:
            json.dump({"loop_cpu_s": time.process_time() - t0, "steps": STEPS * 2 - 1}, fh)
    return total / (STEPS * 2)


final = infer()
print(f"gpt_infer ok steps={STEPS * 2} loss={final:.4f}")
