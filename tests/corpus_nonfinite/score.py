"""Score tensorscope's non-finite origin over this corpus: ``python tests/corpus_nonfinite/score.py [--json]``.

Runs each program through the same pipeline as ``tensorscope explain --json PROG`` (``Session``), all in
one process so that torch is imported once (the corpus has 48 programs), and compares the finding with
the program's ``# expect:`` header (measured with plain torch by measure.py): kind, origin line, op
(the aten op, the backward node, or ``data``) and phase. Buggy programs are scored; their ``_fixed``
twins and the ``fine_`` programs must produce no non-finite finding.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).parent
KINDS = ("non-finite-value", "silent-non-finite-value")


def expect(path: Path) -> dict:
    for line in path.read_text().splitlines():
        if line.startswith("# expect:"):
            body = line.split(":", 1)[1].strip()
            return {} if body == "clean" else dict(part.split("=", 1) for part in body.split())
    raise ValueError(f"{path.name} has no expect header")


def programs() -> list:
    return sorted(p for p in HERE.glob("*.py") if p.name not in ("measure.py", "score.py"))


def finding(doc: dict):
    found = [d for d in [doc.get("diagnosis")] + list(doc.get("hazards") or []) if d and d["kind"] in KINDS]
    return found[0] if found else None


def score(path: Path, doc: dict) -> dict:
    want, got = expect(path), finding(doc)
    if not want:
        return {"clean": got is None}
    if got is None:
        return {"kind": False, "line": False, "op": False, "phase": False}
    nf = got["nonfinite"]
    ops = {"data"} if nf.get("data") else {nf.get("node"), (nf.get("aten") or "").split(".")[-1]}
    lines = {int(want["line"]), int(want.get("alt_line", want["line"]))}
    return {"kind": got["kind"] == want["kind"], "line": (got.get("culprit") or {}).get("line") in lines,
            "op": want["op"] in ops, "phase": nf.get("phase") == want["phase"]}


def explain_doc(path: Path) -> dict:
    import torch

    from tensorscope.session import Session

    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            session = Session(command="explain", program=path.name, argv=[], source=path.read_bytes(),
                              json_mode=False, device="auto", timeout=None)
            return session.execute().doc
    finally:
        os.chdir(cwd)
        torch.autograd.set_detect_anomaly(False)  # a program may leave anomaly mode on


def main() -> dict:
    results = {p.name: score(p, explain_doc(p)) for p in programs()}
    buggy = {k: v for k, v in results.items() if "clean" not in v}
    clean = {k: v for k, v in results.items() if "clean" in v}
    accuracy = {f: sum(v[f] for v in buggy.values()) / len(buggy) for f in ("kind", "line", "op", "phase")}
    return {"buggy": len(buggy), "clean": len(clean), "accuracy": accuracy,
            "silent": sum(v["clean"] for v in clean.values()) / len(clean),
            "misses": {k: v for k, v in results.items() if not all(v.values())}}


if __name__ == "__main__":
    out = main()
    if "--json" in sys.argv:
        print(json.dumps(out))
    else:
        print(f"{out['buggy']} buggy programs, {out['clean']} clean ones: "
              + ", ".join(f"{k} {v:.0%}" for k, v in out["accuracy"].items())
              + f"; clean programs without a finding: {out['silent']:.0%}")
        for name, v in out["misses"].items():
            print(f"  miss {name}: {v}")
