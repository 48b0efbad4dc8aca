"""Instructions (valgrind's callgrind) of one ``small_mlp`` step, per phase and per recorder hook: a figure the
machine's load does not move.

Usage::

    python benchmarks/step_instructions.py [MODE] [STEPS]

MODE is ``plain`` (no wrappers), ``off`` (the wrappers installed, the recorder inactive: the optimizer's
non-finite step hooks still run) or ``full`` (what ``run`` records; the default); any other name (``fullq``)
records as ``full`` and counts the phases only, without the hooks' passes. STEPS is the steps counted per phase
(default 100). The script runs itself under ``valgrind --tool=callgrind`` with instrumentation off until
the model has trained 80 steps (each line's detailed events used up, as in a long run), then counts the
instructions of each phase of a step (``zero_grad``, the two batch views and the forward, ``backward``,
``opt.step()``; the batch views and the forward are one phase, so that the views die at once as in the
workload) over STEPS steps, and with ``full`` the instructions inside each hook of the recorder (the
optimizer step's pre- and post-hooks, the step's write log, the sinks, backward's own record...), each hook in
a pass of its own. Prints instructions per step. Growth samples are off. Needs valgrind, its ``callgrind.h``
header and a C compiler (a ten-line helper is built into a temporary folder for the client requests that
switch counting on and off); run from the repository root, with the tree to measure on ``PYTHONPATH``.
Instruction counts are not time (a torch op's dispatch costs more time per instruction than the interpreter's
loop), but they are exact and repeatable to about 1 %, so two trees can be compared on a loaded machine.
"""
import ctypes
import os
import subprocess
import sys
import tempfile

_HELPER = r"""
#include <valgrind/callgrind.h>
void start_instr(void){ CALLGRIND_START_INSTRUMENTATION; }
void toggle(void){ CALLGRIND_TOGGLE_COLLECT; }
void dump(const char* s){ CALLGRIND_DUMP_STATS_AT(s); }
void zero(void){ CALLGRIND_ZERO_STATS; }
"""
PHASES = ["zero_grad", "views and forward", "backward", "step"]


def callgrind_dumps(script, args, collect_atstart=False):
    """Run ``python script --inner *args`` under callgrind with this file's client-request helper built (its path in
    ``TS_CG_LIB``) and instrumentation off at start; the (label, instructions) of each dump the script asked for,
    in dump order. Shared by short_lived_instructions.py and param_check_cost.py."""
    tmp = tempfile.mkdtemp(prefix="ts_cg_")
    src, lib = os.path.join(tmp, "cg.c"), os.path.join(tmp, "libcg.so")
    with open(src, "w") as f:
        f.write(_HELPER)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
    out = os.path.join(tmp, "cg.out")
    env = dict(os.environ, TS_CG_LIB=lib, OMP_NUM_THREADS="1")
    p = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no"]
                       + ([] if collect_atstart else ["--collect-atstart=no"])
                       + [f"--callgrind-out-file={out}", sys.executable, script, "--inner", *map(str, args)],
                       env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(p.stderr[-3000:])
    rows = []
    for name in sorted(os.listdir(tmp), key=lambda n: int(n.rsplit(".", 1)[-1]) if n[-1].isdigit() else -1):
        if not name.startswith("cg.out."):
            continue
        label = total = None
        with open(os.path.join(tmp, name)) as f:
            for line in f:
                if line.startswith("desc: Trigger: Client Request: "):
                    label = line.split(": ", 3)[-1].strip()
                elif line.startswith(("summary:", "totals:")) and total is None:
                    total = int(line.split()[1])
        if label is not None and total is not None:
            rows.append((label, total))
    return rows


def _outer(mode, steps):
    rows = callgrind_dumps(__file__, [mode, steps])
    empty = dict(rows).get("toggle-pair", 0) / steps  # what one timed call's two toggles cost
    print(f"small_mlp step, {mode}: instructions per step ({steps} steps; hooks net of their toggles, "
          f"{empty:.0f} a call)")
    for label, total in rows:
        if label == "toggle-pair":
            continue
        per = total / steps
        if label.startswith("hook "):
            calls = int(label.rsplit("x", 1)[-1])
            per -= empty * calls
        print(f"  {label:55s} {per:12,.0f}")


def _inner(mode, steps):
    import torch
    import torch.nn.functional as F
    from torch.optim import optimizer as O

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads"))
    from _mlp import SMALL_MLP, setup

    torch.set_num_threads(1)
    cg = ctypes.CDLL(os.environ["TS_CG_LIB"])
    T = cg.toggle
    data, labels, model, opt = setup(**SMALL_MLP)  # small_mlp's own (benchmarks/workloads/_mlp.py)

    def step(i, p=-1):
        if p == 0: T()
        opt.zero_grad()
        if p == 0: T()
        if p == 1: T()
        loss = F.cross_entropy(model(data[i]), labels[i])  # the views die at once, as in the workload
        if p == 1: T()
        if p == 2: T()
        loss.backward()
        if p == 2: T()
        if p == 3: T()
        opt.step()
        if p == 3: T()

    def timed(f):
        def g(*a, **k):
            T()
            try:
                return f(*a, **k)
            finally:
                T()
        return g

    def phases():
        for i in range(16):
            step(i)
        cg.start_instr()
        for i in range(16):
            step(i)
        for p, name in enumerate(PHASES):
            cg.zero()
            for s in range(steps):
                step(s % 16, p)
            cg.dump(f"phase {name}".encode())
        cg.zero()
        f = timed(lambda: None)
        for _ in range(steps):
            f()
        cg.dump(b"toggle-pair")

    for i in range(20):
        step(i % 16)
    if mode == "plain":
        for i in range(60):
            step(i % 16)
        phases()
        return
    from tensorscope.instrument import session
    tr = session.new_tracker(__file__)
    tr.growth.enabled = False
    with session.active(tr):
        for i in range(60):
            step(i % 16)
        tr.active = mode != "off"
        phases()
        if mode != "full":
            return
        targets = [(f"pre-hook {getattr(d[k], '__qualname__', d[k])}", d, k, 1) for d in (O._global_optimizer_pre_hooks,)
                   for k in list(d)]
        targets += [(f"post-hook {getattr(d[k], '__qualname__', d[k])}", d, k, 1)
                    for d in (O._global_optimizer_post_hooks,) for k in list(d)]
        targets += [("OptimizerSteps.log (in the post-hook)", tr.steps, "log", 1),
                    ("ValueWatch.before_backward", tr.values, "before_backward", 1),
                    ("ValueWatch.after_backward", tr.values, "after_backward", 1),
                    ("BackwardCalls.before", tr.backward_calls, "before", 1),
                    ("BackwardCalls.after", tr.backward_calls, "after", 1),
                    ("KeptValues.on_alias (both views)", tr.kept, "on_alias", 2)]
        for label, owner, key, calls in targets:
            if isinstance(owner, dict):
                orig = owner[key]
                owner[key] = timed(orig)
            else:
                orig = getattr(owner, key)
                setattr(owner, key, timed(orig))
            cg.zero()
            for s in range(steps):
                step(s % 16)
            cg.dump(f"hook {label} x{calls}".encode())
            if isinstance(owner, dict):
                owner[key] = orig
            else:
                delattr(owner, key)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        _inner(sys.argv[2], int(sys.argv[3]))
    else:
        _outer(sys.argv[1] if len(sys.argv) > 1 else "full", int(sys.argv[2]) if len(sys.argv) > 2 else 100)
