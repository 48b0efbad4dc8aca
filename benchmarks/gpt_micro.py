"""Four recorder parts of a GPT step under `tensorscope run`, each timed alone in process (CPU, min of repeats).

Usage::

    python benchmarks/gpt_micro.py [REPEATS]

One process: a tracker switched on before the workload's model and optimizer are built (as under ``run``),
20 steps, then, each REPEATS times (default 200): the sinks' check of the optimizer's parameters after a step
(``nonfinite._all_finite_now``), the log of one step's writes recorded whole (``OptimizerSteps.log`` of a
copy of step 20's writes), one retention walk from the program's globals and a fresh ``loss`` (what a growth
sample walks), and ``opt.step()`` with the recorder on and off (the wrappers stay installed: off is their
cost alone). Prints the minimum of each. Compare two trees by running this file with each on
``PYTHONPATH``, alternated. Run from the repository root.
"""
import os
import sys
import time

import torch

torch.set_num_threads(1)
from tensorscope.instrument import nonfinite, optimizer_steps as osm, retention, session

REPEATS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
pt = time.process_time_ns
path = os.path.abspath("benchmarks/workloads/gpt_train.py")
src = open(path).read()
code = compile(src[:src.index("final = train()")], path, "exec")
sys.argv = [path]
g = {"__name__": "__main__", "__file__": path}
tracker = session.new_tracker(path)
kept = {}
log = osm.OptimizerSteps.log


def keeping_log(self, step):
    kept.update(step=step, writes=list(step.writes), opt=step.opt, uf=step.uf)
    return log(self, step)


def best(fn, setup=None, repeats=REPEATS):
    out = None
    for _ in range(repeats):
        if setup is not None:
            setup()
        t = pt()
        fn()
        dt = pt() - t
        out = dt if out is None else min(out, dt)
    return out / 1000


osm.OptimizerSteps.log = keeping_log
with session.active(tracker):
    exec(code, g)
    g["STEPS"] = 1
    for _ in range(20):
        g["train"]()
    osm.OptimizerSteps.log = log
    model, opt, stream = g["model"], g["opt"], g["stream"]
    params = [p for group in opt.param_groups for p in group["params"]]
    results = {"sinks: the parameters' check": best(lambda: nonfinite._all_finite_now(params))}
    step = kept["step"]
    step.opt, step.uf = kept["opt"], kept["uf"]
    results[f"an optimizer step's log ({len(kept['writes'])} writes)"] = best(
        lambda: tracker.steps.log(step), setup=lambda: setattr(step, "writes", list(kept["writes"])))
    loss = model(stream[0][:, :-1], stream[0][:, 1:])
    loss.backward()
    roots = [(k, v, "global") for k, v in g.items() if not k.startswith("__")] + [("loss", loss, "local")]
    tracker.pause()
    walked = []
    results["a retention walk"] = best(
        lambda: walked.append(retention.Walk(tracker.user, budget=20_000).run(roots).release()), repeats=REPEATS // 4)
    tracker.resume()
    results["opt.step(), recorder on"] = best(opt.step, repeats=REPEATS // 4)
    tracker.active = False
    results["opt.step(), recorder off"] = best(opt.step, repeats=REPEATS // 4)
    tracker.active = True
for name, us in results.items():
    print(f"{name:40s} {us:8.1f} us")
