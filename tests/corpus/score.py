"""Score tensorscope on the explain corpus: run the real CLI on every program and print a per-kind table.

It scores any folder of programs (``--dir tests/corpus_world``). A program is a file ``NAME.py`` or a
folder ``NAME/`` whose entry point is ``NAME/main.py`` (a multi-file program: its other files beside it
or in packages below it). The header is read from the entry file; the markers may be on lines of any
file of the program, and a culprit, saved-by or backward line is right only when file AND line match.

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
    python tests/corpus/score.py --dir tests/corpus_world --figures-json out.json   # another folder

The summary gives the issue's figures as right/total: kind (failing programs), culprit, saved, backward
(programs with that marker), fine (fine programs with no diagnosis and no hazard: no false alarm), silent
(programs declaring a hazard that tensorscope reports).

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
TIMEOUT_S = 900  # guards a hang, not speed: a niced run on a loaded 2-core machine takes minutes
MARKERS = ("culprit-alt", "culprit", "saved", "backward")
TOOLS = ("score.py", "verify.py")  # scripts that live beside the programs and are not programs
_HEADER = re.compile(r"^#\s*expect-([a-z-]+):\s*(.*?)\s*$")
_MARKER = re.compile(r"<-\s*(culprit-alt|culprit|saved|backward)\b")


@dataclass
class Program:
    path: Path  # the entry file: NAME.py or NAME/main.py
    kind: str
    hazard: Optional[str] = None
    alias: Optional[str] = None
    node: Optional[str] = None
    cpu_only: bool = False
    marks: Dict[str, int] = field(default_factory=dict)  # marker -> line
    mark_files: Dict[str, Path] = field(default_factory=dict)  # marker -> resolved file holding it
    source: Optional[str] = None  # `# source:` URL on line 1 (world corpus)

    @property
    def multi_file(self) -> bool:
        return self.path.name == "main.py" and self.path.parent.is_dir() and self.path.parent != self.path.parent.parent

    @property
    def name(self) -> str:
        """NAME.py, or NAME/main.py for a multi-file program (the golden files' key)."""
        return f"{self.path.parent.name}/main.py" if self.multi_file else self.path.name

    @property
    def stem(self) -> str:
        return self.path.parent.name if self.multi_file else self.path.stem

    @property
    def files(self) -> List[Path]:
        """Every Python file of the program (the entry file first)."""
        if not self.multi_file:
            return [self.path]
        rest = sorted(p for p in self.path.parent.rglob("*.py") if p != self.path and "__pycache__" not in p.parts)
        return [self.path] + rest

    @property
    def culprit_lines(self) -> List[int]:
        return [self.marks[m] for m in ("culprit", "culprit-alt") if m in self.marks]

    def place(self, marker: str) -> Optional[tuple]:
        """(resolved file, line) of a marker, or None."""
        if marker not in self.marks:
            return None
        return (self.mark_files.get(marker, self.path.resolve()), self.marks[marker])

    @property
    def culprit_places(self) -> List[tuple]:
        return [self.place(m) for m in ("culprit", "culprit-alt") if m in self.marks]


def programs(folder: Optional[Path] = None) -> List[Path]:
    """Every program's entry file in a corpus folder, sorted by name (tools and _private files excluded):
    NAME.py files and NAME/main.py of multi-file programs."""
    folder = Path(folder) if folder else CORPUS
    files = [p for p in folder.glob("*.py") if p.name not in TOOLS and not p.name.startswith("_")]
    dirs = [d / "main.py" for d in folder.iterdir() if d.is_dir() and not d.name.startswith(("_", ".")) and (d / "main.py").is_file()]
    return sorted(files + dirs, key=lambda p: p.parent.name if p.name == "main.py" else p.stem)


def parse(path: Path) -> Program:
    header: Dict[str, str] = {}
    marks: Dict[str, int] = {}
    mark_files: Dict[str, Path] = {}
    prog = Program(path=path, kind="")
    for file in prog.files:
        for lineno, line in enumerate(file.read_text().splitlines(), 1):
            m = _HEADER.match(line)
            if m and file == path:
                header[m.group(1)] = m.group(2)
            for marker in _MARKER.findall(line):
                if marker in marks:
                    raise ValueError(f"{prog.name}: marker {marker!r} appears twice")
                marks[marker] = lineno
                mark_files[marker] = file.resolve()
    if "kind" not in header:
        raise ValueError(f"{prog.name}: no '# expect-kind:' header")
    first = path.read_text().splitlines()[:1]
    src = re.match(r"^#\s*source:\s*(\S+)", first[0]) if first else None
    return Program(
        path=path,
        kind=header["kind"],
        hazard=header.get("hazard"),
        alias=header.get("alias"),
        node=header.get("node"),
        cpu_only=header.get("cpu-only", "").lower() in ("1", "true", "yes"),
        marks=marks,
        mark_files=mark_files,
        source=src.group(1) if src else None,
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
    return explained(r.returncode, r.stdout, r.stderr)


def explained(returncode: int, stdout: str, stderr: str) -> Explained:
    """An `explain --json` run's exit status and output, parsed."""
    try:
        return Explained(returncode, json.loads(stdout), None, _last_line(stderr))
    except json.JSONDecodeError as e:
        tail = _last_line(stderr) or stdout[:200]
        return Explained(returncode, None, f"stdout is not JSON ({e}); stderr: {tail}", _last_line(stderr))


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


def _key(path: Path) -> str:
    """The golden file's key of a program: NAME.py, or NAME/main.py for a multi-file program."""
    return f"{path.parent.name}/main.py" if path.name == "main.py" else path.name


def _digest(path: Path) -> str:
    # The golden file is valid for one content of the program's files and one torch version (read without
    # importing torch). A multi-file program hashes every file of its folder, with their relative names.
    from importlib.metadata import version

    if path.name != "main.py":
        return hashlib.sha256(path.read_bytes() + version("torch").encode()).hexdigest()
    h = hashlib.sha256()
    for f in sorted(p for p in path.parent.rglob("*.py") if "__pycache__" not in p.parts):
        h.update(f.relative_to(path.parent).as_posix().encode() + b"\0" + f.read_bytes())
    h.update(version("torch").encode())
    return h.hexdigest()


def golden_path(folder: Optional[Path] = None) -> Path:
    return (Path(folder) / "plain_python.json") if folder else GOLDEN


def load_golden(folder: Optional[Path] = None) -> Dict[str, dict]:
    try:
        return json.loads(golden_path(folder).read_text())
    except (OSError, ValueError):
        return {}


def plain_behaviour_cached(path: Path, golden: Dict[str, dict]) -> Dict[str, object]:
    """Plain-python behaviour from the golden file when it was recorded for this exact file and torch
    version; otherwise run `python PROG` now. (Importing torch dominates each run, so the golden file keeps
    the corpus test inside its time budget.)"""
    entry = golden.get(_key(path))
    if entry and entry.get("sha256") == _digest(path):
        return {"returncode": entry["returncode"], "last_stderr_line": entry["last_stderr_line"]}
    return plain_behaviour(path)


def refresh_golden(paths: List[Path], workers: int, folder: Optional[Path] = None) -> None:
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        results = dict(zip([_key(p) for p in paths], pool.map(plain_behaviour, paths)))
    golden = {_key(p): {"sha256": _digest(p), **results[_key(p)]} for p in paths}
    out = golden_path(folder)
    out.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out} ({len(golden)} programs)")


# ---- checking ---------------------------------------------------------------------------------------


def _line(obj: Optional[dict]) -> Optional[int]:
    return obj.get("line") if isinstance(obj, dict) else None


def _place(obj: Optional[dict]) -> Optional[tuple]:
    """(resolved file, line) of a reported location; a relative file is relative to the run's cwd (REPO)."""
    if not isinstance(obj, dict) or obj.get("line") is None or not obj.get("file"):
        return None
    f = Path(obj["file"])
    return ((f if f.is_absolute() else REPO / f).resolve(), obj["line"])


def _where(obj: Optional[dict]) -> Optional[str]:
    """`file:line` for reports, the file relative to REPO when it can be."""
    p = _place(obj)
    if p is None:
        return str(_line(obj)) if _line(obj) is not None else None
    try:
        rel = p[0].relative_to(REPO).as_posix()
    except ValueError:
        rel = str(p[0])
    return f"{rel}:{p[1]}"


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
    # A location is right when file AND line match (a multi-file program's culprit may be in its package).
    if prog.kind != "none" or prog.hazard:
        if prog.culprit_lines:
            v["culprit"] = _place((target or {}).get("culprit")) in prog.culprit_places
        if "saved" in prog.marks:
            v["saved"] = _place((target or {}).get("saved_by")) == prog.place("saved")
        if "backward" in prog.marks:
            v["backward"] = _place((target or {}).get("backward")) == prog.place("backward")
        if prog.alias:
            alias = ((target or {}).get("culprit") or {}).get("alias") or ""
            v["alias"] = prog.alias in alias
        if prog.node:
            v["node"] = ((target or {}).get("saved_by") or {}).get("node") == prog.node
    # fine: a fine program gets no diagnosis and no hazard at all (no false alarm).
    v["fine"] = (res.doc is not None and diag is None and not doc.get("hazards")) if (prog.kind == "none" and not prog.hazard) else None
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
        parts.append(f"{key}={_where(target.get(key))}")
    culprit = target.get("culprit") or {}
    parts.append(f"alias={culprit.get('alias')!r}")
    parts.append(f"node={(target.get('saved_by') or {}).get('node')}")
    if diag is not None and hazards:
        parts.append(f"hazards={[h.get('kind') for h in hazards]}")
    return ", ".join(parts)


def _mark_where(prog: Program, marker: str) -> str:
    f, line = prog.place(marker)
    if not prog.multi_file:
        return str(line)
    try:
        return f"{f.relative_to(REPO).as_posix()}:{line}"
    except ValueError:
        return f"{f}:{line}"


def expected(prog: Program) -> str:
    m = prog.marks
    parts = [f"kind={prog.kind}"]
    if prog.hazard:
        parts.append(f"hazard={prog.hazard}")
    if prog.culprit_lines:
        parts.append("culprit=" + "|".join(_mark_where(prog, k) for k in ("culprit", "culprit-alt") if k in m))
    for key, marker in (("saved_by", "saved"), ("backward", "backward")):
        if marker in m:
            parts.append(f"{key}={_mark_where(prog, marker)}")
    if prog.alias:
        parts.append(f"alias~{prog.alias!r}")
    if prog.node:
        parts.append(f"node={prog.node}")
    return ", ".join(parts)


# ---- the table --------------------------------------------------------------------------------------

COLUMNS = ("kind", "culprit", "saved", "backward", "alias", "node", "fine", "exit")
FIGURES = ("kind", "culprit", "saved", "backward", "fine", "silent")


def measures(prog: Program, v: Dict[str, Optional[bool]]) -> Dict[str, bool]:
    """The issue's measures that apply to one program: kind (failing programs: expect-kind not none),
    culprit / saved / backward (programs with that marker), fine (fine programs: no diagnosis, no hazard),
    silent (programs declaring a hazard: the hazard reported)."""
    out: Dict[str, bool] = {}
    for name in FIGURES:
        if name == "kind":
            x = v["kind"] if prog.kind != "none" else None
        elif name == "silent":
            x = v["hazard"] if prog.hazard else None
        else:
            x = v.get(name)
        if x is not None:
            out[name] = bool(x)
    return out


def figures(rows: List[tuple]) -> Dict[str, List[int]]:
    """The issue's measures as {measure: [right, total]} over rows of (prog, res, verdicts, ...)."""
    out: Dict[str, List[int]] = {name: [0, 0] for name in FIGURES}
    for row in rows:
        for name, ok in measures(row[0], row[2]).items():
            out[name][0] += ok
            out[name][1] += 1
    return out


def floors_doc(rows: List[tuple], commit: str) -> dict:
    """floors.json: the figures measured and every miss, with what tensorscope said (CI fails on any new
    miss and on a listed miss that is now right, so the floor only moves up, by rerecording)."""
    misses = {}
    for prog, res, v, *_ in rows:
        wrong = sorted(k for k, ok in measures(prog, v).items() if not ok)
        if wrong:
            misses[prog.name] = {"measures": wrong, "expected": expected(prog), "got": describe(prog, res)}
    return {
        "measured_on": commit,
        "figures": figures(rows),
        "misses": dict(sorted(misses.items())),
    }


def figures_line(figs: Dict[str, List[int]]) -> str:
    return "  ".join(f"{k} {r}/{t}" for k, (r, t) in figs.items())


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
    ap.add_argument("--dir", dest="folder", type=Path, default=None, help="corpus folder (default: tests/corpus)")
    ap.add_argument("--figures-json", type=Path, default=None, help="write the figures as JSON to this file")
    ap.add_argument("--write-floors", action="store_true", help="record DIR/floors.json (figures and misses; every program)")
    ap.add_argument("-k", dest="pattern", default="", help="only programs whose file name contains this")
    ap.add_argument("-j", dest="workers", type=int, default=2, help="parallel subprocesses (default 2)")
    ap.add_argument("--behaviour", action="store_true", help="also compare python PROG with tensorscope run -o")
    ap.add_argument("--refresh-golden", action="store_true", help="rerecord plain-python behaviour and exit")
    opts = ap.parse_args(argv)
    folder = opts.folder.resolve() if opts.folder else None
    paths = [p for p in programs(folder) if opts.pattern in _key(p)]
    if opts.refresh_golden:
        refresh_golden(programs(folder), opts.workers, folder)
        return 0
    progs = [parse(p) for p in paths]
    if any(p.cpu_only for p in progs):
        import torch

        if torch.cuda.is_available():
            progs = [p for p in progs if not p.cpu_only]
    golden = load_golden(folder)

    def one(prog: Program):
        res = explain(prog.path)
        beh = None
        if opts.behaviour:
            beh = (plain_behaviour_cached(prog.path, golden), tensorscope_behaviour(prog.path))
        return prog, res, check(prog, res), beh

    with concurrent.futures.ThreadPoolExecutor(opts.workers) as pool:
        rows = list(pool.map(one, progs))
    print(table(rows))
    figs = figures(rows)
    print("\nfigures (right/total): " + figures_line(figs))
    if opts.figures_json:
        opts.figures_json.write_text(json.dumps(figs, indent=1) + "\n")
    if opts.write_floors:
        if opts.pattern:
            print("--write-floors needs every program (no -k)", file=sys.stderr)
            return 2
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
        out = (folder or CORPUS) / "floors.json"
        out.write_text(json.dumps(floors_doc(rows, head), indent=1) + "\n")
        print(f"wrote {out}")
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
