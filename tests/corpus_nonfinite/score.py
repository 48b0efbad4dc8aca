"""Score tensorscope's non-finite origin over this corpus: ``python tests/corpus_nonfinite/score.py [--json]``.

Runs each program through the same pipeline as ``tensorscope explain --json PROG`` (``Session``), all in
one process so that torch is imported once (the corpus has 48 programs), and compares the finding with
the program's ``# expect:`` header (measured with plain torch by measure.py): kind, origin line, op
(the aten op, the backward node, or ``data``) and phase; for a gradient that the engine's sum made
non-finite (``summed=``), the lines of the uses whose gradients it added, with the line. Buggy programs
are scored; their ``_fixed`` twins and the ``fine_`` programs must produce no non-finite finding.

``score.py --run [--json]`` scores a plain ``tensorscope run`` instead: each buggy program's header names
the first sink that held a NaN or Inf (``sink=loss|grad|parameter sink_line=N sink_step=K``, measured with
plain torch by ``measure.py --sinks``: the loss given to backward, the gradients after it, the parameters
after a step), which must be the report's ``nonfinite.sink`` (what, line, step), with the kind of the
header; a program that raised on the value before any sink held it (``sink=none``) must get the kind with
no sink, and every twin and fine program no non-finite finding. ``--with-run`` adds the second score to the
first under ``"run"``.

The headers were measured on torch 2.13. Before scoring, each program's truth is measured again on the running
torch (``measure.truth``, in this process): where it differs from the header (a release whose ``acos`` makes no
NaN at exactly 1), the program is scored against the measured truth, with the op left unscored when the
measure cannot tell it (a forward op), and listed under ``"differs"`` with both, never passed silently.
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


def _node(op: str) -> bool:
    return op.endswith("Backward0") or op.endswith("Backward1") or op.endswith("Backward")


def differs(header: dict, measured: dict) -> list:
    """The fields of ``header`` that the running torch, measured (``measure.truth``), does not bear out."""
    if not header or not measured:
        return [] if bool(header) == bool(measured) else ["clean" if not measured else "buggy"]
    out = [f for f in ("kind", "phase", "summed", "sink", "sink_line", "sink_step") if header.get(f) != measured.get(f)]
    if measured["line"] not in (header["line"], header.get("alt_line", header["line"])):
        out.append("line")
    if "node" in measured and _node(header["op"]) and header["op"] != measured["node"]:
        out.append("op")
    return out


_TRUTH: dict = {}


def truth(path: Path) -> tuple:
    """(what to score against, the header's fields the running torch does not bear out): the header when it
    holds on this release, else the measured truth (its op from the node for a backward origin, else unknown)."""
    if path.name not in _TRUTH:
        import measure

        header, measured = expect(path), measure.truth(str(path))
        wrong = differs(header, measured)
        if not wrong:
            _TRUTH[path.name] = (header, [], measured)
        elif not measured:
            _TRUTH[path.name] = ({}, wrong, measured)
        else:
            want = dict(measured)
            same_op = measured["phase"] == header.get("phase") and "line" not in wrong
            want["op"] = measured.get("node") or (header.get("op") if same_op else None)
            _TRUTH[path.name] = (want, wrong, measured)
    want, wrong, _ = _TRUTH[path.name]
    return want, wrong


def programs() -> list:
    return sorted(p for p in HERE.glob("*.py") if p.name not in ("measure.py", "score.py"))


def finding(doc: dict):
    found = [d for d in [doc.get("diagnosis")] + list(doc.get("hazards") or []) if d and d["kind"] in KINDS]
    return found[0] if found else None


def score(path: Path, doc: dict) -> dict:
    want, got = truth(path)[0], finding(doc)
    if not want:
        return {"clean": got is None}
    if got is None:
        return {"kind": False, "line": False, "op": False, "phase": False}
    nf = got["nonfinite"]
    ops = {"data"} if nf.get("data") else {nf.get("node"), (nf.get("aten") or "").split(".")[-1]}
    lines = {int(want["line"]), int(want.get("alt_line", want["line"]))}
    line = (got.get("culprit") or {}).get("line") in lines
    if "summed" in want:  # a gradient the engine added up: the lines of the uses whose gradients it summed too
        got_lines = sorted({s["line"] for s in nf.get("summed") or []})
        line = line and got_lines == [int(n) for n in want["summed"].split(",")]
    out = {"kind": got["kind"] == want["kind"], "line": line,
           "op": want["op"] in ops, "phase": nf.get("phase") == want["phase"]}
    if want["op"] is None:  # a forward op this release's measure cannot tell: not scored (listed in "differs")
        del out["op"]
    return out


def score_run(path: Path, doc: dict) -> dict:
    want, got = truth(path)[0], finding(doc)
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
    for p in programs():  # the truth on this release first, before tensorscope is imported
        truth(p)
    if run:
        results = {p.name: score_run(p, explain_doc(p, "run")) for p in programs()}
    else:
        results = {p.name: score(p, explain_doc(p)) for p in programs()}
    buggy = {k: v for k, v in results.items() if "clean" not in v}
    clean = {k: v for k, v in results.items() if "clean" in v}
    fields = ("kind", "sink") if run else ("kind", "line", "op", "phase")
    accuracy = {f: sum(v[f] for v in buggy.values() if f in v) / max(1, sum(f in v for v in buggy.values()))
                for f in fields}
    import torch

    return {"buggy": len(buggy), "clean": len(clean), "accuracy": accuracy,
            "silent": sum(v["clean"] for v in clean.values()) / len(clean),
            "misses": {k: v for k, v in results.items() if not all(v.values())},
            "torch": torch.__version__.split("+")[0],
            "differs": {p.name: {"fields": truth(p)[1], "header": expect(p), "measured": _TRUTH[p.name][2]}
                        for p in programs() if truth(p)[1]}}


if __name__ == "__main__":
    out = main(run="--run" in sys.argv)
    if "--with-run" in sys.argv:  # both scores from one process (tests/test_nonfinite.py)
        out["run"] = main(run=True)
    if "--json" in sys.argv:
        print(json.dumps(out))
    else:
        for res, label in ((out, "explain"), (out.get("run"), "run")):
            if res is None:
                continue
            print(f"torch {res['torch']}, {label}: {res['buggy']} buggy programs, {res['clean']} clean ones: "
                  + ", ".join(f"{k} {v:.0%}" for k, v in res["accuracy"].items())
                  + f"; clean programs without a finding: {res['silent']:.0%}")
            for name, v in res["misses"].items():
                print(f"  miss {name}: {v}")
        for name, v in out["differs"].items():
            print(f"  torch {out['torch']} differs from the header in {name} ({', '.join(v['fields'])}): "
                  f"scored against {v['measured'] or 'clean'}")
