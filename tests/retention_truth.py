"""Ground truth of tests/corpus_retention/, measured with torch alone (no tensorscope).

Each program marks its retaining line with ``# CULPRIT`` and the ablation that fixes it with
``FIX: <code>`` (on the same line or another): the flat twin is the program with that line's code
replaced. For a program and its twin this script measures, with torch's profiler
(``profile_memory=True``), the peak of live tensor bytes over the run at LEAK_STEPS=N and 2N: the
growth per step is (peak(2N) - peak(N)) / N. It also counts the autograd nodes reachable from the
program's globals at the end (a graph kept alive by a global). Run::

    python tests/retention_truth.py tests/corpus_retention/*.py

and the header lines ``# measured: ...`` are printed for each program (copied into the files).
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


_PROBE = r'''
import json, runpy, sys
import torch
from torch.profiler import profile, ProfilerActivity
path = sys.argv[1]
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
for v in list(g.values()):
    for t in (v if isinstance(v, (list, tuple)) else list(v.values()) if isinstance(v, dict) else [v]):
        if isinstance(t, torch.Tensor) and t.grad_fn is not None:
            stack.append(t.grad_fn)
while stack:
    n = stack.pop()
    if id(n) in seen:
        continue
    seen.add(id(n)); nodes += 1
    stack.extend(m for m, _ in n.next_functions if m is not None)
print(json.dumps({"peak": peak, "nodes": nodes, "error": g.get("__error__")}))
'''


def measure(source: str, steps: int, folder: str) -> dict:
    path = os.path.join(folder, "prog.py")
    with open(path, "w") as f:
        f.write(source)
    env = dict(os.environ, LEAK_STEPS=str(steps))
    out = subprocess.run([sys.executable, "-c", _PROBE, path], capture_output=True, text=True, env=env, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def growth(source: str, n: int = 8) -> dict:
    with tempfile.TemporaryDirectory() as d:
        a, b = measure(source, n, d), measure(source, 2 * n, d)
    return {"bytes_per_step": (b["peak"] - a["peak"]) // n, "nodes_per_step": (b["nodes"] - a["nodes"]) // n,
            "error": a["error"]}


def main(paths) -> None:
    for p in paths:
        text = open(p).read()
        leak, twin = growth(text), growth(twin_source(text))
        print(f"{os.path.basename(p)}: # measured (torch {__import__('torch').__version__}, retention_truth.py, "
              f"N=8 vs 16 steps): leak {leak['bytes_per_step']:+,} B/step peak tensor memory, "
              f"{leak['nodes_per_step']:+} global graph nodes/step{', raises ' + leak['error'] if leak['error'] else ''}; "
              f"twin {twin['bytes_per_step']:+,} B/step, {twin['nodes_per_step']:+} nodes/step"
              f"{', raises ' + twin['error'] if twin['error'] else ''}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
