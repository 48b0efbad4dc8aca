"""Fixes are valid code for the line at hand (issue 9, item 6).

Every code fragment (in backticks) of a fix must parse; a rewritten line is built from the line's
AST, assigns only to a name, attribute or subscript, and uses an out-of-place op that exists (checked
against torch here). On corpus programs whose fix rewrites the culprit line, applying the rewrite
with plain python removes the error. The corpus part runs a fixed sample of tests/corpus by default,
checked in tests/test_corpus.py on the `explain --json` run that file already makes of every program (a
second explain of the same program here would cost a torch start-up each for nothing);
TENSORSCOPE_FIX_SAMPLE=all runs every other program of both corpora here (slow: one CLI run each).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from _cli import REPO, run_cli, run_python
from tensorscope.kinds._fixes import NO_OUT_OF_PLACE, assignable, clone_of, rewrite_out_of_place
from test_kinds import fragments, parses

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("line,expected", [
    ("w -= lr * g", "w = w - lr * g"),
    ("x += y + 1", "x = x + (y + 1)"),
    ("x *= a @ b", "x = x * (a @ b)"),
    ("x.mul_(2)", "x = x.mul(2)"),
    ("self.h.relu_()", "self.h = self.h.relu()"),
    ("x[0].add_(1, alpha=2)", "x[0] = x[0].add(1, alpha=2)"),
    ("alias.zero_()", "alias = torch.zeros_like(alias)"),
    ("buf.fill_(3.0)", "buf = torch.full_like(buf, 3.0)"),
    ("trainer.run().add_(1)", None),  # never `trainer.run() = ...`
    ("x.uniform_()", None),  # no out-of-place `uniform`
    ("x.copy_(y)", None),
    ("y = x.add_(1)", None),
    ("not python (", None),
])
def test_rewrite_is_built_from_the_ast(line, expected):
    assert rewrite_out_of_place(line) == expected
    if expected:
        assert parses(expected)


def test_assignable_targets_only():
    assert assignable("x") and assignable("self.w") and assignable("x[0]") and assignable("a.b[1].c")
    assert not assignable("trainer.run()") and not assignable("the tensor") and not assignable("")
    assert not assignable("f(x).y")
    assert all(parses(f) for f in fragments(clone_of("trainer.run()") + clone_of("x")))


def test_out_of_place_table_agrees_with_torch():
    deliberate = {"resize_", "resize_as_", "requires_grad_"}
    for op in NO_OUT_OF_PLACE - deliberate:
        assert not hasattr(torch.Tensor, op[:-1]), op
    for op in (n for n in dir(torch.Tensor) if n.endswith("_") and not n.startswith("_")):
        if op not in NO_OUT_OF_PLACE:
            assert hasattr(torch.Tensor, op[:-1]), f"{op} has no out-of-place method: add it to NO_OUT_OF_PLACE"


# --------------------------------------------------------------------------
# The corpus: every fix parses; rewrites of the culprit line remove the error.

CORPORA = [REPO / "tests" / "corpus", REPO / "tests" / "corpus_world"]
# A sample that covers the kinds whose fixes rewrite lines (in-place writes of every flavour).
SAMPLE = ["leaf_", "view_", "inplace_", "overlap", "backward_twice", "no_grad"]


def _all_programs() -> list[Path]:
    out = []
    for corpus in CORPORA:
        if corpus.is_dir():
            out += sorted(p for p in corpus.glob("*.py") if p.name not in ("score.py", "verify.py"))
            out += sorted(corpus.glob("*/main.py"))
    return out


def default_sample() -> list[Path]:
    """The first two programs of each family (deterministic); tests/test_corpus.py checks their fixes."""
    out = _all_programs()
    picked = []
    for prefix in SAMPLE:
        picked += [p for p in out if (p.parent.name if p.name == "main.py" else p.stem).startswith(prefix)][:2]
    return picked


def _programs() -> list[Path]:
    if os.environ.get("TENSORSCOPE_FIX_SAMPLE") != "all":
        return []
    sampled = set(default_sample())
    return [p for p in _all_programs() if p not in sampled]


PROGRAMS = _programs()


def _rewrite_in(fix: str, culprit_code: str) -> str | None:
    """The fragment of ``fix`` that is the culprit line rewritten out of place, if there is one."""
    expected = rewrite_out_of_place(culprit_code)
    for fragment in fragments(fix):
        if expected and fragment.strip() == expected:
            return fragment
    m = re.search(r"replace the line with `([^`]+)`", fix)
    return m[1] if m else None


@pytest.mark.skipif(not PROGRAMS, reason="TENSORSCOPE_FIX_SAMPLE=all only (the default sample is checked in tests/test_corpus.py)")
@pytest.mark.parametrize("prog", PROGRAMS or [None], ids=[str(p.relative_to(REPO)) for p in PROGRAMS] or ["sample"])
def test_corpus_fix_is_valid_code(prog, tmp_path):
    cwd = prog.parent
    rc, _, err, doc = run_cli("explain", "--json", prog.name, cwd=cwd)
    _, _, before = run_python(prog, cwd=cwd)
    check_fix(prog, doc, before.strip().splitlines()[-1] if before.strip() else "", tmp_path)


def check_fix(prog: Path, doc: dict | None, last_error_line: str, tmp_path: Path) -> None:
    """The fix of PROG's `explain --json` document DOC is valid code, and its rewrite of the culprit line
    (if any) removes the error whose last stderr line under plain python is LAST_ERROR_LINE."""
    cwd = prog.parent
    d = (doc or {}).get("diagnosis")
    if d is None:
        return  # a fine program: no fix to check
    for fragment in fragments(d["fix"]):
        assert parses(fragment) or parses(f"x{fragment}") or parses(fragment + "\ndef f():\n    pass"), fragment
        assert not re.match(r"^[^=]*\)\s*=[^=]", fragment), f"assignment to a call: {fragment}"
    culprit = d.get("culprit") or {}
    rewrite = _rewrite_in(d["fix"], culprit.get("code") or "")
    if not rewrite or not culprit.get("file", "").endswith(prog.name):
        return
    # apply the rewrite at the culprit line (indentation kept) and run the copy with plain python
    lines = prog.read_text().splitlines()
    i = culprit["line"] - 1
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + rewrite
    fixed = tmp_path / prog.name
    fixed.write_text("\n".join(lines) + "\n")
    rc_after, _, after = run_python(fixed, cwd=cwd)
    assert rc_after == 0 or last_error_line not in after, (rewrite, after[-500:])
