"""Ground truth of tests/corpus_retention/, measured with torch alone (no tensorscope).

Each program marks its retaining line with ``# CULPRIT`` and the ablation that fixes it with
``FIX: <code>`` (on the same line or another): the flat twin is the program with that line's code
replaced. For a program and its twin this script measures, with torch's profiler
(``profile_memory=True``), the peak of live tensor bytes over the run at LEAK_STEPS=N and 2N: the
growth per step is (peak(2N) - peak(N)) / N. It also counts the autograd nodes reachable from the
program's globals at the end (a graph kept alive by a global, by its lists, tuples and dicts, or by the
attributes of its objects: a module's list, a trainer's history, a metric's running sum; six levels deep). Run::

    python tests/retention_truth.py tests/corpus_retention/*.py

and the header line ``# measured (...)`` is printed for each program (copied into its file). The four
runs of a program and its twin share one process (one torch import); a program that raises (the
backward-twice ones) is measured up to its exception.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

_FIX = re.compile(r"FIX:\s*(.+)$")


def culprit_line(text: str) -> int | None:
    """The 1-based line marked ``# CULPRIT``."""
    for i, line in enumerate(text.splitlines(), 1):
        if "# CULPRIT" in line:
            return i
    return None


def expected_kind(text: str) -> str | None:
    m = re.search(r"^# expect-kind: (\S+)", text, re.M)
    return m.group(1) if m else None


def twin_source(text: str) -> str:
    """The program with its ``FIX:`` line's code replaced by the fix (indentation kept)."""
    out = []
    for line in text.splitlines():
        m = _FIX.search(line)
        if m and "#" in line and not line.lstrip().startswith("#"):
            indent = line[:len(line) - len(line.lstrip())]
            line = indent + m.group(1).strip()
        out.append(line)
    return "\n".join(out) + "\n"


_PROBE = r"""
import json, os, runpy, sys, types
import torch
from torch.profiler import profile, ProfilerActivity
for path, steps in json.loads(sys.argv[1]):
    os.environ["LEAK_STEPS"] = str(steps)
    g = {}
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        try:
            g = runpy.run_path(path, run_name="__main__")
        except BaseException as e:
            g = {"__error__": type(e).__name__}
    live = peak = 0
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        live += e.self_cpu_memory_usage
        peak = max(peak, live)
    nodes, seen, stack = 0, set(), []
    todo, met = [(v, 0) for v in g.values()], set()
    while todo:  # tensors in the globals, their lists, tuples, dicts and the attributes of their objects
        v, depth = todo.pop()
        if id(v) in met:
            continue
        met.add(id(v))
        if isinstance(v, torch.Tensor):
            if v.grad_fn is not None:
                stack.append(v.grad_fn)
        elif depth < 6 and isinstance(v, (list, tuple)):
            todo.extend((x, depth + 1) for x in v)
        elif depth < 6 and isinstance(v, dict):
            todo.extend((x, depth + 1) for x in v.values())
        elif depth < 6 and not isinstance(v, (type, types.ModuleType, types.FunctionType, types.MethodType)) \
                and isinstance(getattr(v, "__dict__", None), dict):
            todo.extend((x, depth + 1) for x in vars(v).values())
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n)); nodes += 1
        stack.extend(m for m, _ in n.next_functions if m is not None)
    del g, prof
    print("@@" + json.dumps({"path": path, "steps": steps, "peak": peak, "nodes": nodes}), flush=True)
"""


def growth_pair(text: str, n: int = 8) -> tuple[dict, dict]:
    """(leak, twin) growth per step, all four runs in one process (one torch import)."""
    with tempfile.TemporaryDirectory() as d:
        leak, twin = os.path.join(d, "leak.py"), os.path.join(d, "twin.py")
        with open(leak, "w") as f:
            f.write(text)
        with open(twin, "w") as f:
            f.write(twin_source(text))
        runs = [[leak, n], [leak, 2 * n], [twin, n], [twin, 2 * n]]
        out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(runs)], capture_output=True, text=True,
                             timeout=1800, stdin=subprocess.DEVNULL)
        rows = [json.loads(line[2:]) for line in out.stdout.splitlines() if line.startswith("@@")]
    by = {(r["path"], r["steps"]): r for r in rows}

    def per_step(p):
        a, b = by[(p, n)], by[(p, 2 * n)]
        return {"bytes_per_step": (b["peak"] - a["peak"]) // n, "nodes_per_step": (b["nodes"] - a["nodes"]) // n}

    return per_step(leak), per_step(twin)


def main(paths) -> None:
    for p in paths:
        text = open(p).read()
        try:
            leak, twin = growth_pair(text)
        except Exception as e:  # a program the probe could not measure: say so
            print(f"{os.path.basename(p)}: not measured ({type(e).__name__})", flush=True)
            continue
        print(f"{os.path.basename(p)}: # measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): "
              f"leak {leak['bytes_per_step']:+,} B/step peak tensor memory, {leak['nodes_per_step']:+} graph nodes/step "
              f"held by globals; twin {twin['bytes_per_step']:+,} B/step, {twin['nodes_per_step']:+} nodes/step",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
