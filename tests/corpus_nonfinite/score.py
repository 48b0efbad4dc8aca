"""Score tensorscope's non-finite origin over this corpus: ``python tests/corpus_nonfinite/score.py [--json]``.

Runs each program through the same pipeline as ``tensorscope explain --json PROG`` (``Session``), all in
one process so that torch is imported once (the corpus has 48 programs), and compares the finding with
the program's ``# expect:`` header (measured with plain torch by measure.py): kind, origin line, op
(the aten op, the backward node, or ``data``) and phase. Buggy programs are scored; their ``_fixed``
twins and the ``fine_`` programs must produce no non-finite finding.

``score.py --run [--json]`` scores a plain ``tensorscope run`` instead: each buggy program's header names
the first sink that held a NaN or Inf (``sink=loss|grad|parameter sink_line=N sink_step=K``, measured with
plain torch by ``measure.py --sinks``: the loss given to backward, the gradients after it, the parameters
after a step), which must be the report's ``nonfinite.sink`` (what, line, step), with the kind of the
header; a program that raised on the value before any sink held it (``sink=none``) must get the kind with
no sink, and every twin and fine program no non-finite finding. ``--with-run`` adds the second score to the
first under ``"run"``.
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


def score_run(path: Path, doc: dict) -> dict:
    want, got = expect(path), finding(doc)
    if not want:
        return {"clean": got is None}
    if got is None:
        return {"kind": False, "sink": False}
    sink = (got.get("nonfinite") or {}).get("sink") or {}
    if want["sink"] == "none":  # the program raised on the value before it reached a sink: the raising line
        return {"kind": got["kind"] == want["kind"], "sink": not sink}
    return {"kind": got["kind"] == want["kind"], "sink": (sink.get("what"), sink.get("line"), sink.get("step"))
            == (want["sink"], int(want["sink_line"]), int(want["sink_step"]))}


def explain_doc(path: Path, command: str = "explain") -> dict:
    import torch

    from tensorscope.session import Session

    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            session = Session(command=command, program=path.name, argv=[], source=path.read_bytes(),
                              json_mode=False, device="auto", timeout=None)
            return session.execute().doc
    finally:
        os.chdir(cwd)
        torch.autograd.set_detect_anomaly(False)  # a program may leave anomaly mode on


def main(run: bool = False) -> dict:
    if run:
        results = {p.name: score_run(p, explain_doc(p, "run")) for p in programs()}
    else:
        results = {p.name: score(p, explain_doc(p)) for p in programs()}
    buggy = {k: v for k, v in results.items() if "clean" not in v}
    clean = {k: v for k, v in results.items() if "clean" in v}
    fields = ("kind", "sink") if run else ("kind", "line", "op", "phase")
    accuracy = {f: sum(v[f] for v in buggy.values()) / len(buggy) for f in fields}
    return {"buggy": len(buggy), "clean": len(clean), "accuracy": accuracy,
            "silent": sum(v["clean"] for v in clean.values()) / len(clean),
            "misses": {k: v for k, v in results.items() if not all(v.values())}}


if __name__ == "__main__":
    out = main(run="--run" in sys.argv)
    if "--with-run" in sys.argv:  # both scores from one process (tests/test_nonfinite.py)
        out["run"] = main(run=True)
    if "--json" in sys.argv:
        print(json.dumps(out))
    else:
        print(f"{out['buggy']} buggy programs, {out['clean']} clean ones: "
              + ", ".join(f"{k} {v:.0%}" for k, v in out["accuracy"].items())
              + f"; clean programs without a finding: {out['silent']:.0%}")
        for name, v in out["misses"].items():
            print(f"  miss {name}: {v}")
