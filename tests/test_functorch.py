"""torch.func (functorch) failures: `vmap-inplace` and `functorch-transform`, on programs written from
public reports (tests/programs/functorch/, each failing one with a fixed twin).

The truth is torch's own: each program is run under plain python, and the line tensorscope names as the
culprit must be the innermost line of the program in python's traceback (and carry the `# <- culprit`
marker); a fixed twin exits 0 under python and gets no diagnosis and no hazard.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from tests._cli import run_cli, run_python, validate_against_schema
from tests._sample import ci_sample

HERE = Path(__file__).resolve().parent / "programs" / "functorch"
# A fixed sample in CI (tests/_sample.py), every program with TENSORSCOPE_CORPUS_FULL=1.
PROGRAMS = ci_sample(sorted(HERE.glob("*.py")), 8)
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in ')


def _header(path: Path, key: str) -> str | None:
    for line in path.read_text().splitlines():
        m = re.match(rf"#\s*expect-{key}:\s*(\S+)", line)
        if m:
            return m.group(1)
    return None


def _marked(path: Path, marker: str) -> set[int]:
    return {i for i, line in enumerate(path.read_text().splitlines(), 1) if f"# <- {marker}" in line}


@functools.lru_cache(maxsize=None)
def _python(prog: Path) -> tuple[int, str, str]:
    """Plain `python PROG`, once per program and process."""
    return run_python(prog, fresh=False)  # forked, as explain's run is: what it raises, not how it exits


def _innermost_program_line(stderr: str, path: Path) -> int | None:
    """The last frame of PATH in python's traceback: where the program itself was when torch raised."""
    line = None
    for text in stderr.splitlines():
        m = _FRAME.match(text)
        if m and Path(m["file"]).resolve() == path.resolve():
            line = int(m["line"])
    return line


@pytest.mark.parametrize("prog", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_functorch_program(prog: Path):
    kind = _header(prog, "kind")
    status, _, err = _python(prog)
    rc, out, ts_err, doc = run_cli("explain", "--json", str(prog))
    assert doc is not None, ts_err[-2000:]
    validate_against_schema(doc)
    assert doc["program"]["exit_status"] == status
    if kind == "none":
        assert status == 0, err[-1000:]
        assert doc["diagnosis"] is None and doc["hazards"] == [], doc["diagnosis"]
        assert rc == 0
        return
    assert status == 1, "the failing program must fail under plain python"
    d = doc["diagnosis"]
    assert d is not None and d["kind"] == kind, (d or {}).get("kind")
    assert rc == 1
    truth = _innermost_program_line(err, prog)
    assert truth is not None
    assert d["culprit"]["line"] == truth
    assert truth in _marked(prog, "culprit")
    assert d["fix"] and "tensorscope" not in d["fix"]


def test_vmap_inplace_names_where_the_unbatched_tensor_was_made():
    prog = HERE / "vmap_zeros_of_shape_setitem.py"
    _, _, _, doc = run_cli("explain", "--json", str(prog))
    d = doc["diagnosis"]
    made = min(_marked(prog, "created"))
    assert f"line {made}" in d["explanation"]
    # the fix rewrites that line's factory over an input's shape into the batched *_like factory
    assert "torch.zeros_like(x)" in d["fix"]


def test_vmap_inplace_captured_tensor_gets_the_outside_fix():
    prog = HERE / "vmap_captured_running_sum.py"
    _, _, _, doc = run_cli("explain", "--json", str(prog))
    d = doc["diagnosis"]
    assert d["kind"] == "vmap-inplace"
    assert "`running`" in d["explanation"]


@pytest.mark.parametrize("prog", [p for p in PROGRAMS if _header(p, "kind") not in (None, "none")],
                         ids=lambda p: p.stem)
def test_pasted_message_is_recognised_offline(prog: Path):
    """`explain --message` on python's own last traceback line names the same kind, running nothing."""
    _, _, err = _python(prog)
    last = [line for line in err.splitlines() if line.strip()][-1]
    rc, _, _, doc = run_cli("explain", "--json", "--message", last)
    kind = _header(prog, "kind")
    if kind == "vmap-inplace" and "doesn't match the broadcast shape" in last:
        # outside a run the broadcast text alone does not say vmap was active: not this kind
        assert doc["diagnosis"] is None or doc["diagnosis"]["kind"] != "vmap-inplace"
        return
    assert doc["diagnosis"] is not None and doc["diagnosis"]["kind"] == kind, last
    assert rc == 1
