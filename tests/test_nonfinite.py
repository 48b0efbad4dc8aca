"""Non-finite values: the corpus of tests/corpus_nonfinite scored by the real CLI, and the surfaces.

Each corpus program states in its header what torch measured (tests/corpus_nonfinite/measure.py):
``# expect: kind=K line=N op=OP phase=P`` or ``# expect: clean``. The test runs ``tensorscope
explain --json`` on each and scores the origin line, op and phase; every buggy program has a
``_fixed`` twin that must be clean, and the ``fine_`` programs handle non-finite values on purpose
(NOTE [Non-finite values handled on purpose]).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "corpus_nonfinite"
PROGRAMS = sorted(p for p in CORPUS.glob("*.py") if p.name != "measure.py")


def expect(path: Path) -> dict:
    for line in path.read_text().splitlines():
        if line.startswith("# expect:"):
            body = line.split(":", 1)[1].strip()
            if body == "clean":
                return {}
            return dict(part.split("=", 1) for part in body.split())
    raise AssertionError(f"{path.name} has no expect header")


def run_cli(args, cwd=CORPUS):
    env = dict(os.environ, TENSORSCOPE_NO_PROGRESS="1")
    return subprocess.run([sys.executable, "-m", "tensorscope", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def finding(doc):
    found = [d for d in [doc.get("diagnosis")] + (doc.get("hazards") or [])
             if d and d["kind"] in ("non-finite-value", "silent-non-finite-value")]
    return found[0] if found else None


def score(path: Path, doc: dict) -> dict:
    want = expect(path)
    got = finding(doc)
    if not want:
        return {"clean": got is None}
    if got is None:
        return {"kind": False, "line": False, "op": False, "phase": False}
    nf = got["nonfinite"]
    line = (got.get("culprit") or {}).get("line")
    ops = {"data"} if nf.get("data") else {nf.get("node"), (nf.get("aten") or "").split(".")[-1]}
    return {"kind": got["kind"] == want["kind"],
            "line": line in {int(want["line"]), int(want.get("alt_line", want["line"]))},
            "op": want["op"] in ops, "phase": nf.get("phase") == want["phase"]}


def test_corpus_shape():
    buggy = [p for p in PROGRAMS if not p.name.startswith("fine_") and not p.stem.endswith("_fixed")]
    assert len(buggy) >= 20
    for p in buggy:
        twin = p.with_name(p.stem + "_fixed.py")
        assert twin.exists() and expect(twin) == {} and expect(p), p.name
    assert len([p for p in PROGRAMS if p.name.startswith("fine_")]) >= 6


def test_corpus_scored():
    """explain over the whole corpus: origin line, op and phase of each buggy program, silence on the rest."""
    results = {}
    for p in PROGRAMS:
        out = run_cli(["explain", "--json", p.name])
        doc = json.loads(out.stdout)
        results[p.name] = score(p, doc)
    buggy = {k: v for k, v in results.items() if "clean" not in v}
    clean = {k: v for k, v in results.items() if "clean" in v}
    acc = {f: sum(v[f] for v in buggy.values()) / len(buggy) for f in ("kind", "line", "op", "phase")}
    silent = sum(v["clean"] for v in clean.values()) / len(clean)
    print(f"\nnon-finite corpus: {len(buggy)} buggy, {len(clean)} clean; "
          + ", ".join(f"{k} {v:.0%}" for k, v in acc.items()) + f"; clean programs silent {silent:.0%}")
    misses = {k: v for k, v in results.items() if not all(v.values())}
    assert acc["line"] >= 0.9 and acc["phase"] >= 0.9 and acc["op"] >= 0.85 and acc["kind"] >= 0.9, misses
    assert silent == 1.0, misses
