"""Score tensorscope on the explain corpus: run the real CLI on every program and print a per-kind table.

Each program in this folder declares what tensorscope must find, in its header::

    # expect-kind: inplace-modified-saved-tensor   (or: none)
    # expect-hazard: silent-saved-tensor-write     (optional)
    # expect-alias: tmp                            (optional; must appear in culprit.alias)
    # expect-node: SigmoidBackward0                (optional; the node that saved the tensor)
    # expect-cpu-only: true                        (optional; the expectation holds on a CPU-only build)

and marks lines with trailing comments: ``# <- culprit``, ``# <- culprit-alt`` (an equally
acceptable culprit line), ``# <- saved``, ``# <- backward``. One line may carry several markers.

Usage::

    python tests/corpus/score.py                  # table + failures
    python tests/corpus/score.py -k inplace_      # only programs whose name contains inplace_
    python tests/corpus/score.py --behaviour      # also compare `python prog` with `tensorscope run -o`
    python tests/corpus/score.py --refresh-golden # rerecord plain-python behaviour (golden file)

tests/test_corpus.py imports this file for the parsing, running and checking helpers.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

CORPUS = Path(__file__).resolve().parent
REPO = CORPUS.parent.parent
GOLDEN = CORPUS / "plain_python.json"
TIMEOUT_S = 60
MARKERS = ("culprit-alt", "culprit", "saved", "backward")
_HEADER = re.compile(r"^#\s*expect-([a-z-]+):\s*(.*?)\s*$")
_MARKER = re.compile(r"<-\s*(culprit-alt|culprit|saved|backward)\b")


@dataclass
class Program:
    path: Path
    kind: str
    hazard: Optional[str] = None
    alias: Optional[str] = None
    node: Optional[str] = None
    cpu_only: bool = False
    marks: Dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def culprit_lines(self) -> List[int]:
        return [self.marks[m] for m in ("culprit", "culprit-alt") if m in self.marks]


def programs() -> List[Path]:
    """Every corpus program, sorted by name (this script and _private files excluded)."""
    return sorted(p for p in CORPUS.glob("*.py") if p.name != "score.py" and not p.name.startswith("_"))


def parse(path: Path) -> Program:
    header: Dict[str, str] = {}
    marks: Dict[str, int] = {}
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            header[m.group(1)] = m.group(2)
        for marker in _MARKER.findall(line):
            if marker in marks:
                raise ValueError(f"{path.name}: marker {marker!r} appears twice")
            marks[marker] = lineno
    if "kind" not in header:
        raise ValueError(f"{path.name}: no '# expect-kind:' header")
    return Program(
        path=path,
        kind=header["kind"],
        hazard=header.get("hazard"),
        alias=header.get("alias"),
        node=header.get("node"),
        cpu_only=header.get("cpu-only", "").lower() in ("1", "true", "yes"),
        marks=marks,
    )


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("NO_COLOR", "1")
    return env


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@dataclass
class Explained:
    returncode: int
    doc: Optional[dict]
    error: Optional[str]  # why doc is None (or the JSON could not be parsed)
    last_stderr_line: str = ""  # with --json the program's output and traceback go to stderr


def explain(path: Path) -> Explained:
    """`python -m tensorscope explain --json PROG`, parsed."""
    cmd = [sys.executable, "-m", "tensorscope", "explain", "--json", str(path)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=_env(), timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Explained(-1, None, f"timed out after {TIMEOUT_S}s")
    try:
        return Explained(r.returncode, json.loads(r.stdout), None, _last_line(r.stderr))
    except json.JSONDecodeError as e:
        tail = _last_line(r.stderr) or r.stdout[:200]
        return Explained(r.returncode, None, f"stdout is not JSON ({e}); stderr: {tail}", _last_line(r.stderr))


def plain_behaviour(path: Path) -> Dict[str, object]:
    """Exit status and last stderr line of `python PROG`."""
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=REPO, env=_env(), timeout=TIMEOUT_S)
    return {"returncode": r.returncode, "last_stderr_line": _last_line(r.stderr)}


def tensorscope_behaviour(path: Path) -> Dict[str, object]:
    """Exit status and last stderr line of `tensorscope run -o FILE.json PROG`."""
    with tempfile.TemporaryDirectory(prefix="ts-corpus-") as tmp:
        out = os.path.join(tmp, "report.json")
        cmd = [sys.executable, "-m", "tensorscope", "run", "-o", out, str(path)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=_env(), timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {"returncode": -1, "last_stderr_line": f"timed out after {TIMEOUT_S}s"}
    return {"returncode": r.returncode, "last_stderr_line": _last_line(r.stderr)}


def _digest(path: Path) -> str:
    # The golden file is valid for one file content and one torch version (read without importing torch).
    from importlib.metadata import version

    return hashlib.sha256(path.read_bytes() + version("torch").encode()).hexdigest()


def load_golden() -> Dict[str, dict]:
    try:
        return json.loads(GOLDEN.read_text())
    except (OSError, ValueError):
        return {}


def plain_behaviour_cached(path: Path, golden: Dict[str, dict]) -> Dict[str, object]:
    """Plain-python behaviour from the golden file when it was recorded for this exact file and torch
    version; otherwise run `python PROG` now. (Importing torch dominates each run, so the golden file keeps
    the corpus test inside its time budget.)"""
    entry = golden.get(path.name)
    if entry and entry.get("sha256") == _digest(path):
        return {"returncode": entry["returncode"], "last_stderr_line": entry["last_stderr_line"]}
    return plain_behaviour(path)


def refresh_golden(paths: List[Path], workers: int) -> None:
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        results = dict(zip([p.name for p in paths], pool.map(plain_behaviour, paths)))
    golden = {p.name: {"sha256": _digest(p), **results[p.name]} for p in paths}
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} ({len(golden)} programs)")


# ---- checking ---------------------------------------------------------------------------------------


def _line(obj: Optional[dict]) -> Optional[int]:
    return obj.get("line") if isinstance(obj, dict) else None


def check(prog: Program, res: Explained) -> Dict[str, Optional[bool]]:
    """One verdict per criterion: True (right), False (wrong), None (not applicable to this program)."""
    doc = res.doc or {}
    diag = doc.get("diagnosis") if res.doc else None
    got_kind = (diag or {}).get("kind") if diag else ("none" if res.doc else None)
    v: Dict[str, Optional[bool]] = {}
    v["json"] = res.doc is not None
    v["kind"] = got_kind == prog.kind
    diagnosed = prog.kind != "none" or bool(prog.hazard)
    v["exit"] = res.returncode == (1 if diagnosed else 0)
    v["culprit"] = v["saved"] = v["backward"] = v["alias"] = v["node"] = v["hazard"] = None
    if prog.hazard:
        hz = [h for h in (doc.get("hazards") or []) if isinstance(h, dict) and h.get("kind") == prog.hazard]
        v["hazard"] = bool(hz)
        target = hz[0] if hz else None
    elif prog.kind != "none":
        target = diag if v["kind"] else None
    else:
        target = None
    if prog.kind != "none" or prog.hazard:
        if prog.culprit_lines:
            v["culprit"] = _line((target or {}).get("culprit")) in prog.culprit_lines
        if "saved" in prog.marks:
            v["saved"] = _line((target or {}).get("saved_by")) == prog.marks["saved"]
        if "backward" in prog.marks:
            v["backward"] = _line((target or {}).get("backward")) == prog.marks["backward"]
        if prog.alias:
            alias = ((target or {}).get("culprit") or {}).get("alias") or ""
            v["alias"] = prog.alias in alias
        if prog.node:
            v["node"] = ((target or {}).get("saved_by") or {}).get("node") == prog.node
    return v


def describe(prog: Program, res: Explained) -> str:
    """What tensorscope returned, in one line, for failure reports."""
    if res.doc is None:
        return f"exit {res.returncode}, no JSON: {res.error}"
    diag = res.doc.get("diagnosis")
    hazards = res.doc.get("hazards") or []
    target = diag or (hazards[0] if hazards else None)
    if target is None:
        return f"exit {res.returncode}, diagnosis null, no hazards"
    parts = [f"exit {res.returncode}", f"kind={target.get('kind')}" + (" (hazard)" if diag is None else "")]
    for key in ("culprit", "saved_by", "backward"):
        parts.append(f"{key}={_line(target.get(key))}")
    culprit = target.get("culprit") or {}
    parts.append(f"alias={culprit.get('alias')!r}")
    parts.append(f"node={(target.get('saved_by') or {}).get('node')}")
    if diag is not None and hazards:
        parts.append(f"hazards={[h.get('kind') for h in hazards]}")
    return ", ".join(parts)


def expected(prog: Program) -> str:
    m = prog.marks
    parts = [f"kind={prog.kind}"]
    if prog.hazard:
        parts.append(f"hazard={prog.hazard}")
    if prog.culprit_lines:
        parts.append("culprit=" + "|".join(map(str, prog.culprit_lines)))
    for key, marker in (("saved_by", "saved"), ("backward", "backward")):
        if marker in m:
            parts.append(f"{key}={m[marker]}")
    if prog.alias:
        parts.append(f"alias~{prog.alias!r}")
    if prog.node:
        parts.append(f"node={prog.node}")
    return ", ".join(parts)


# ---- the table --------------------------------------------------------------------------------------

COLUMNS = ("kind", "culprit", "saved", "backward", "alias", "node", "exit")


def _cell(verdicts: List[Optional[bool]]) -> str:
    applicable = [x for x in verdicts if x is not None]
    return f"{sum(applicable)}/{len(applicable)}" if applicable else "-"


def table(rows: List[tuple]) -> str:
    by_kind: Dict[str, List[dict]] = defaultdict(list)
    for prog, _res, v, _beh in rows:
        label = f"hazard:{prog.hazard}" if prog.hazard else prog.kind
        by_kind[label].append(v)
    head = ["kind", "programs"] + [f"{c} ok" for c in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label in sorted(by_kind) + ["TOTAL"]:
        vs = [v for vv in by_kind.values() for v in vv] if label == "TOTAL" else by_kind[label]
        cells = [label, str(len(vs))] + [_cell([v[c] for v in vs]) for c in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", dest="pattern", default="", help="only programs whose file name contains this")
    ap.add_argument("-j", dest="workers", type=int, default=2, help="parallel subprocesses (default 2)")
    ap.add_argument("--behaviour", action="store_true", help="also compare python PROG with tensorscope run -o")
    ap.add_argument("--refresh-golden", action="store_true", help="rerecord plain-python behaviour and exit")
    opts = ap.parse_args(argv)
    paths = [p for p in programs() if opts.pattern in p.name]
    if opts.refresh_golden:
        refresh_golden(programs(), opts.workers)
        return 0
    progs = [parse(p) for p in paths]
    if any(p.cpu_only for p in progs):
        import torch

        if torch.cuda.is_available():
            progs = [p for p in progs if not p.cpu_only]
    golden = load_golden()

    def one(prog: Program):
        res = explain(prog.path)
        beh = None
        if opts.behaviour:
            beh = (plain_behaviour_cached(prog.path, golden), tensorscope_behaviour(prog.path))
        return prog, res, check(prog, res), beh

    with concurrent.futures.ThreadPoolExecutor(opts.workers) as pool:
        rows = list(pool.map(one, progs))
    print(table(rows))
    failures = [(p, r, v, b) for p, r, v, b in rows if any(x is False for x in v.values())]
    if failures:
        print(f"\n{len(failures)} program(s) with a wrong answer:")
        for prog, res, v, _ in failures:
            wrong = ", ".join(k for k, x in v.items() if x is False)
            print(f"- {prog.name}  [{wrong}]\n    expected: {expected(prog)}\n    got:      {describe(prog, res)}")
    if opts.behaviour:
        changed = [(p, b) for p, _r, _v, b in rows if b[0] != b[1]]
        print(f"\nbehaviour changed by `tensorscope run -o`: {len(changed)} program(s)")
        for prog, (plain, ts) in changed:
            print(f"- {prog.name}\n    python:      {plain}\n    tensorscope: {ts}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
