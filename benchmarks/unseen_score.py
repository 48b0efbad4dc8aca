"""Score `tensorscope run` on programs with a marked culprit and an ablation twin (leak14).

Each program marks the line tensorscope should name with ``# CULPRIT``, its expected kind with
``# expect-kind: KIND``, and the ablation that fixes it with ``FIX: <code>``; the twin is the program
with that ablation applied (tests/retention_truth.py's ``twin_source``). A leak is found when the report
has a hazard (or the failure diagnosis) of the expected kind whose culprit is the marked line; a twin is
silent when the report has no hazard of the retention or silent-aliasing kinds and no failure. The truth
of each program (growth per step, or what a copy compares) comes from torch alone: tests/retention_truth.py
and the ``TRUTH`` line the aliasing programs print. Usage::

    python benchmarks/unseen_score.py --tree /work/main tests/programs/unseen14/*.py

``--tree`` is the tensorscope checkout to score (its directory goes first on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from retention_truth import culprit_line, expected_kind, twin_source  # noqa: E402

WATCHED = {"graph-kept-alive", "view-pins-storage", "hook-holds-tensors", "container-grows", "kept-value-changed",
           "shared-state", "backward-twice"}


def report(tree: str, path: str) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, "-m", "tensorscope", "run", "--json", path], capture_output=True, text=True,
                         env=env, timeout=600, stdin=subprocess.DEVNULL, cwd=os.path.dirname(path))
    try:
        return json.loads(out.stdout)
    except ValueError:
        return {"error": out.stderr[-400:]}


def findings(doc: dict) -> list[dict]:
    out = [h for h in doc.get("hazards") or [] if h.get("kind") in WATCHED]
    if doc.get("diagnosis"):
        out.append(doc["diagnosis"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", required=True)
    ap.add_argument("programs", nargs="+")
    a = ap.parse_args()
    found = silent = 0
    for p in a.programs:
        p = os.path.abspath(p)
        text = open(p).read()
        kind, line = expected_kind(text), culprit_line(text)
        leak = findings(report(a.tree, p))
        with tempfile.TemporaryDirectory() as d:
            twin_path = os.path.join(d, os.path.basename(p))
            with open(twin_path, "w") as f:
                f.write(twin_source(text))
            twin = findings(report(a.tree, twin_path))
        hit = any(h.get("kind") == kind and (h.get("culprit") or {}).get("line") == line for h in leak)
        got = ", ".join(f"{h.get('kind')}@{(h.get('culprit') or {}).get('line')}" for h in leak) or "nothing"
        found += hit
        silent += not twin
        print(f"{os.path.basename(p)}: expected {kind}@{line}; leak: {got} -> {'FOUND' if hit else 'MISSED'}; "
              f"twin: {'silent' if not twin else 'NOISY ' + ', '.join(h.get('kind') for h in twin)}", flush=True)
    n = len(a.programs)
    print(f"found {found}/{n}; twins silent {silent}/{n}")


if __name__ == "__main__":
    main()
