"""Check every world-corpus program's declared expectations with torch alone (never with tensorscope).

For each program (NAME.py, or NAME/main.py for a multi-file program; format: tests/corpus/score.py):

- source: line 1 of the entry file is `# source: URL`;
- plain: `python PROG` ends as the expected kind says: exit 0 for `none` (and for a silent hazard), else the
  exception type and message family of that kind (KIND_FAMILIES below, PyTorch's own words);
- culprit: the `# <- culprit` line replaced by `pass` at the same indentation (in whichever file of the
  program holds it, in a copy) makes the error go away or change. A removal that only breaks the program
  (SyntaxError, NameError, UnboundLocalError) confirms nothing and fails;
- saved: with anomaly mode on (torch.autograd.set_detect_anomaly(True) before the program runs), the
  innermost user frame of the "Traceback of forward call that caused the error" is the `# <- saved` file
  and line (user code: every file outside the Python installation, so a model package beside the script
  is the user's and its line is the one to mark);
- backward: the innermost user frame of the plain run's traceback is the `# <- backward` file and line;
- silent: for `# expect-hazard: silent-saved-tensor-write`, the program prints its gradient on lines that
  start with `grad` and those lines differ from the ones printed with the culprit write removed (which
  must still exit 0): the write changed the gradient without any error.

A silent program raises nothing, so its saved and backward lines are confirmed with torch's saved-tensor
hooks instead (torch.autograd.graph.saved_tensors_hooks around the whole program): each saved tensor is
copied when packed, with the Python stack of the line that saved it; when backward unpacks a tensor whose
values differ from that copy, the innermost user frame of the stack at the save must be the `# <- saved`
line and that of the stack at the unpack the `# <- backward` line. (A gradient written by a hook is no saved tensor: `n/a` there.)

Usage::

    python tests/corpus_world/verify.py              # every program, table, exit 1 if any is not confirmed
    python tests/corpus_world/verify.py -k twice_     # only programs whose name contains twice_
    python tests/corpus_world/verify.py --dir tests/corpus -j 1

Runs at most 2 programs at a time (-j 1 for one); each check is a fresh `python` that imports torch.
`--write-golden` also records the plain runs as DIR/plain_python.json (the behaviour golden file that
tests/test_corpus_world.py compares tensorscope with).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TIMEOUT_S = 900  # guards a hang, not speed: a niced run on a loaded 2-core machine takes minutes

_SCORE = REPO / "tests" / "corpus" / "score.py"
_spec = importlib.util.spec_from_file_location("tensorscope_corpus_score", _SCORE)
score = sys.modules.get(_spec.name) or importlib.util.module_from_spec(_spec)
if _spec.name not in sys.modules:
    sys.modules[_spec.name] = score  # dataclasses look their module up in sys.modules
    _spec.loader.exec_module(score)

# kind -> (exception types, message pattern searched in the end of stderr). PyTorch's own messages.
_RT = ("RuntimeError",)
KIND_FAMILIES: Dict[str, Tuple[Tuple[str, ...], str]] = {
    "inplace-modified-saved-tensor": (_RT, r"one of the variables needed for gradient computation has been modified by an inplace operation"),
    "backward-twice": (_RT, r"Trying to backward through the graph a second time|saved tensors after they have already been freed"),
    "no-grad-fn": (_RT, r"does not require grad and does not have a grad_fn"),
    "leaf-inplace": (_RT, r"a leaf Variable that requires grad (is being|has been) used in an in-place operation"),
    "view-inplace": (_RT, r"is a view and (its base or another view of its base )?(is being|has been) modified inplace|a view of a leaf Variable that requires grad|view was created in no_grad mode|view .*modified inplace"),
    "overlapping-write": (_RT, r"more than one element of the written-to tensor refers to a single memory location"),
    "non-scalar-backward": (_RT, r"grad can be implicitly created only for (real )?scalar outputs"),
    "non-float-requires-grad": (_RT, r"Only Tensors of floating point (and complex )?dtype can require gradients"),
    "numpy-requires-grad": (_RT, r"Can't call numpy\(\) on Tensor that requires grad"),
    "resize-requires-grad": (_RT, r"cannot resize variables that require grad"),
    # a CPU-only build raises AssertionError("Torch not compiled with CUDA enabled") (expect-cpu-only programs)
    "device-mismatch": (_RT + ("AssertionError",), r"Expected all tensors to be on the same device|device|not compiled with"),
    "non-leaf-requires-grad": (_RT, r"you can only change requires_grad flags of leaf variables"),
    "inference-tensor-saved": (_RT, r"Inference tensors cannot be saved for backward"),
    "double-backward-unsupported": (_RT, r"marked with @once_differentiable"),
    "gradient-shape-mismatch": (_RT, r"Mismatch in shape: grad_output"),
    # torch 2.13 says "The differentiated Tensor at index N appears ..."; older releases "One of the differentiated Tensors appears ..."
    "unused-input": (_RT, r"appears to not have been used in the graph"),
    "non-leaf-grad-none": (("TypeError", "AttributeError"), r"NoneType|None"),
    "float-has-no-backward": (("AttributeError",), r"'float' object has no attribute 'backward'"),
    "inplace-backward-unsupported": (_RT, r"In-place .*(backward|not supported)|not supported.*in-place"),
    "saved-detached-inplace": (_RT, r"saved tensor that has been detached in-place"),
    "checkpoint-mismatch": (_RT + ("CheckpointError",), r"checkpoint|[Rr]ecomput"),
    # ops and custom Functions without a forward-mode formula raise NotImplementedError
    "forward-ad": (_RT + ("ValueError", "NotImplementedError"), r"forward[- ]?(mode )?AD|dual|tangent"),
    "invalid-gradient": (_RT, r"returned an invalid gradient|Function .* returned .* gradient"),
    "ddp-unused-parameters": (_RT, r"Expected to have finished reduction in the prior iteration"),
    "ddp-mark-ready-twice": (_RT, r"Expected to mark a variable ready only once"),
    "other": ((), r""),
}
# A culprit removal that only breaks the program says nothing about the culprit.
_BROKEN = re.compile(r"^(SyntaxError|IndentationError|NameError|UnboundLocalError)\b")
_EXC = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit))\b")
_FORWARD_TB = "Traceback of forward call that caused the error"
_CHANGED = re.compile(r"^SAVED-CHANGED (saved|unpacked) (.+):(\d+)$", re.M)
# Frames inside the Python installation (standard library, site-packages, torch) are not user code.
_LIB_DIRS = tuple(
    str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("stdlib", "platstdlib", "purelib", "platlib")
)


def _user(frames: List[Tuple[Path, int]]) -> Optional[Tuple[Path, int]]:
    """The innermost frame outside the Python installation, or None."""
    user = [f for f in frames if not str(f[0]).startswith(_LIB_DIRS)]
    return user[-1] if user else None


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)', re.M)

# Runs a program with anomaly mode on, as `python PROG` would run it (sys.path[0], argv, __main__).
_ANOMALY = (
    "import runpy, sys, torch; p = sys.argv[1]; sys.argv = sys.argv[1:]; "
    "sys.path[0] = __import__('os').path.dirname(p); torch.autograd.set_detect_anomaly(True); "
    "runpy.run_path(p, run_name='__main__')"
)
# Runs a program under saved-tensor hooks that report saved tensors whose values changed before unpacking.
_SAVED_CHANGED = """
import os, runpy, sys, traceback, torch
p = sys.argv[1]; sys.argv = sys.argv[1:]; sys.path[0] = os.path.dirname(p)
found = []
import sysconfig
LIB = tuple(os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib"))
def pack(t):
    return (t, t.detach().clone(), traceback.extract_stack()[:-1])
def unpack(packed):
    t, copy, stack = packed
    if not torch.equal(t.detach(), copy):
        found.append((stack, traceback.extract_stack()[:-1]))
    return t
try:
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        runpy.run_path(p, run_name='__main__')
finally:
    for saved, unpacked in found:
        for what, stack in (("saved", saved), ("unpacked", unpacked)):
            user = [f for f in stack if not f.filename.startswith("<") and not os.path.realpath(f.filename).startswith(LIB)]
            if user:
                print(f"SAVED-CHANGED {what} {user[-1].filename}:{user[-1].lineno}", file=sys.stderr)
"""


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def last(self) -> str:
        return score._last_line(self.stderr)

    @property
    def exc_type(self) -> str:
        # A multi-line message (CheckpointError, forward-AD NotImplementedError) ends with a line of its
        # text, not with the exception's name: take the last line that starts with one.
        for line in reversed([ln for ln in self.stderr.splitlines() if ln.strip()]):
            m = _EXC.match(line)
            if m:
                return m.group(1).rsplit(".", 1)[-1]
        return ""

    def frames(self, after: Optional[str] = None) -> List[Tuple[Path, int]]:
        text = self.stderr
        if after is not None:
            i = text.find(after)
            if i < 0:
                return []
            text = text[i:]
            j = text.find("\nTraceback (most recent call last)")  # the exception's own traceback follows
            text = text[:j] if j >= 0 else text
        return [(Path(f).resolve(), int(n)) for f, n in _FRAME.findall(text) if not f.startswith("<")]

    def grad_lines(self) -> List[str]:
        return [ln.strip() for ln in self.stdout.splitlines() if ln.strip().startswith("grad")]


def _run(cmd: List[str], cwd: Path) -> Run:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the program sees what `python PROG` sees
    env.setdefault("NO_COLOR", "1")
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=TIMEOUT_S)
        return Run(r.returncode, r.stdout, r.stderr, time.monotonic() - t0)
    except subprocess.TimeoutExpired:
        return Run(-1, "", f"TimeoutError: timed out after {TIMEOUT_S}s", time.monotonic() - t0)


def _without_culprit(prog, tmp: Path) -> Path:
    """A copy of the program with the culprit line replaced by `pass` at its indentation; its entry file."""
    f, line = prog.place("culprit")
    if prog.multi_file:
        root = prog.path.parent.resolve()
        dst_root = tmp / root.name
        shutil.copytree(root, dst_root, ignore=shutil.ignore_patterns("__pycache__"))
        target, entry = dst_root / f.relative_to(root), dst_root / "main.py"
    else:
        target = entry = tmp / prog.path.name
        shutil.copy(prog.path, entry)
    lines = target.read_text().splitlines(keepends=True)
    old = lines[line - 1]
    lines[line - 1] = old[: len(old) - len(old.lstrip())] + "pass\n"
    target.write_text("".join(lines))
    return entry


@dataclass
class Verdict:
    prog: object
    plain: Optional[Run] = None
    checks: Dict[str, Optional[bool]] = field(default_factory=dict)  # None: not applicable
    notes: List[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(v is not False for v in self.checks.values())


def _family_ok(kind: str, run: Run) -> Tuple[bool, str]:
    if kind not in KIND_FAMILIES:
        return False, f"no message family known for kind {kind!r}"
    types, pattern = KIND_FAMILIES[kind]
    if run.returncode == 0:
        return False, "exit 0, expected an error"
    if types and run.exc_type not in types:
        return False, f"exception {run.exc_type or '?'} not in {types}: {run.last[:120]}"
    tail = "\n".join(run.stderr.splitlines()[-30:])
    if pattern and not re.search(pattern, tail, re.I):  # "only Tensors ..." from the requires_grad setter
        return False, f"message not of the family: {run.last[:120]}"
    return True, run.last[:100]


def verify(prog) -> Verdict:
    v = Verdict(prog)
    entry = prog.path.resolve()
    silent = bool(prog.hazard)
    v.checks["source"] = prog.source is not None and prog.source.startswith("http")
    if not v.checks["source"]:
        v.notes.append("line 1 is not '# source: URL'")
    plain = _run([sys.executable, str(entry)], entry.parent)
    v.plain, v.seconds = plain, plain.seconds
    if prog.kind == "none":
        v.checks["plain"] = plain.returncode == 0
        if not v.checks["plain"]:
            v.notes.append(f"plain: exit {plain.returncode}: {plain.last[:120]}")
    else:
        v.checks["plain"], note = _family_ok(prog.kind, plain)
        if not v.checks["plain"]:
            v.notes.append("plain: " + note)
    # culprit removed
    v.checks["culprit"] = None
    if "culprit" in prog.marks:
        with tempfile.TemporaryDirectory(prefix="corpus-verify-") as tmp:
            removed = _run([sys.executable, str(_without_culprit(prog, Path(tmp)))], Path(tmp))
        if _BROKEN.match(removed.last):
            v.checks["culprit"] = False
            v.notes.append(f"culprit removed: the program only breaks: {removed.last[:100]}")
        elif silent:
            before, after = plain.grad_lines(), removed.grad_lines()
            v.checks["culprit"] = removed.returncode == 0 and bool(before) and before != after
            if not v.checks["culprit"]:
                v.notes.append(
                    f"silent: culprit removed exit {removed.returncode}; grad lines {before[:2]} vs {after[:2]}"
                    if before else "silent: the program prints no line starting with 'grad'"
                )
        else:
            changed = removed.returncode != plain.returncode or removed.last != plain.last
            v.checks["culprit"] = changed
            if not changed:
                v.notes.append(f"culprit removed: same outcome: {removed.last[:100]}")
            elif removed.returncode != 0:
                v.notes.append(f"culprit removed: error changed to {removed.last[:80]}")
    elif prog.kind != "none" or silent:
        v.checks["culprit"] = False
        v.notes.append("no '# <- culprit' marker")
    # backward: the plain traceback names it
    v.checks["backward"] = v.checks["saved"] = None
    if "backward" in prog.marks and not silent and prog.kind != "none":
        inner = _user(plain.frames())
        v.checks["backward"] = inner == prog.place("backward")
        if not v.checks["backward"]:
            v.notes.append(f"backward: innermost user frame of the plain traceback is {_show(inner)}")
    # silent: the saved tensor whose values changed was saved on the saved line, unpacked on the backward line
    if silent and "saved" in prog.marks:
        hooked = _run([sys.executable, "-c", _SAVED_CHANGED, str(entry)], entry.parent)
        places = {"saved": set(), "unpacked": set()}
        for what, f, n in _CHANGED.findall(hooked.stderr):
            if not f.startswith("<"):
                places[what].add((Path(f).resolve(), int(n)))
        for marker, what in (("saved", "saved"), ("backward", "unpacked")):
            if marker in prog.marks:
                v.checks[marker] = prog.place(marker) in places[what]
                if not v.checks[marker]:
                    v.notes.append(f"silent: no changed saved tensor was {what} on the {marker} line")
    # saved: anomaly mode's forward traceback names it
    if "saved" in prog.marks and not silent and prog.kind != "none":
        anomaly = _run([sys.executable, "-c", _ANOMALY, str(entry)], entry.parent)
        inner = _user(anomaly.frames(after=_FORWARD_TB))
        v.checks["saved"] = inner == prog.place("saved")
        if not v.checks["saved"]:
            v.notes.append(f"saved: innermost user frame of anomaly mode's forward traceback is {_show(inner)}")
    return v


def _show(place: Optional[Tuple[Path, int]]) -> str:
    if place is None:
        return "none"
    try:
        return f"{place[0].relative_to(REPO).as_posix()}:{place[1]}"
    except ValueError:
        return f"{place[0]}:{place[1]}"


def _cell(x: Optional[bool]) -> str:
    return "n/a" if x is None else ("ok" if x else "FAIL")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", dest="folder", type=Path, default=HERE, help="corpus folder (default: this one)")
    ap.add_argument("-k", dest="pattern", default="", help="only programs whose name contains this (comma: any of several)")
    ap.add_argument("--write-golden", action="store_true", help="record the plain runs in DIR/plain_python.json")
    ap.add_argument("-j", dest="workers", type=int, default=2, choices=(1, 2), help="parallel programs (1 or 2)")
    opts = ap.parse_args(argv)
    folder = opts.folder.resolve()
    pats = opts.pattern.split(",")
    progs = [score.parse(p) for p in score.programs(folder) if any(k in score._key(p) for k in pats)]
    with concurrent.futures.ThreadPoolExecutor(opts.workers) as pool:
        verdicts = list(pool.map(verify, progs))
    cols = ("source", "plain", "culprit", "saved", "backward")
    width = max([len(p.name) for p in progs] + [7])
    print(f"{'program':<{width}}  {'kind':<30} " + " ".join(f"{c:<8}" for c in cols) + " secs")
    for v in verdicts:
        label = v.prog.hazard or v.prog.kind
        print(f"{v.prog.name:<{width}}  {label:<30} " + " ".join(f"{_cell(v.checks.get(c)):<8}" for c in cols) + f" {v.seconds:4.1f}")
    if opts.write_golden:
        golden = {} if not opts.pattern else score.load_golden(folder)
        for v in verdicts:
            key = score._key(v.prog.path)
            golden[key] = {"sha256": score._digest(v.prog.path), "returncode": v.plain.returncode, "last_stderr_line": v.plain.last}
        out = score.golden_path(folder)
        out.write_text(json.dumps(dict(sorted(golden.items())), indent=1, sort_keys=True) + "\n")
        print(f"wrote {out} ({len(golden)} programs)")
    bad = [v for v in verdicts if not v.ok]
    print(f"\n{len(verdicts) - len(bad)}/{len(verdicts)} programs confirmed by torch")
    for v in bad:
        print(f"- {v.prog.name}: " + "; ".join(v.notes))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
