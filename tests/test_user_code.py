"""User code is every file outside the Python installation (issue 9, item 4).

tests/programs/two_folders/ has minGPT's layout: the script projects/adder/adder.py puts the folder
two levels up on sys.path and imports the package tinygpt from there. Events inside that package are
the user's and are named by their own file and line; a write made inside an installed library
(torch.optim) is attributed to the user's line that called it, with the library named.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import pytest
import torch

from _cli import REPO, line_of, run_cli, run_python, validate_against_schema
from tensorscope.instrument.frames import UserCode

TWO = REPO / "tests" / "programs" / "two_folders"
SCRIPT = TWO / "projects" / "adder" / "adder.py"
MODEL = TWO / "tinygpt" / "model.py"
TRAINER = TWO / "tinygpt" / "trainer.py"
INPLACE = "modified by an inplace operation"


def _rel(path) -> str:
    return os.path.relpath(path, REPO)


def _diagnosis(*argv: str) -> dict:
    rc, out, err, doc = run_cli("explain", "--json", _rel(SCRIPT), "--", *argv)
    assert rc == 1 and doc is not None, (rc, out[:300], err[-800:])
    assert validate_against_schema(doc)
    return doc["diagnosis"]


def test_culprit_inside_a_package_beside_the_script():
    rc, _, err = run_python(_rel(SCRIPT), fresh=False)
    assert rc == 1 and INPLACE in err and "output 0 of Sigmoid" in err, err[-500:]
    d = _diagnosis()
    assert d["kind"] == "inplace-modified-saved-tensor", d
    assert (d["culprit"]["file"], d["culprit"]["line"]) == (_rel(MODEL), line_of(MODEL, "gate.mul_(0.5)")), d
    assert d["culprit"].get("library") is None and d["culprit"]["alias"] == "gate"
    assert (d["saved_by"]["file"], d["saved_by"]["line"]) == (_rel(MODEL), line_of(MODEL, "torch.sigmoid("))
    assert (d["backward"]["file"], d["backward"]["line"]) == (_rel(SCRIPT), line_of(SCRIPT, ".backward()"))
    assert "model(x) =" not in d["fix"] and "gate.clone()" in d["fix"], d["fix"]


def test_write_inside_an_installed_library_names_the_calling_line():
    rc, _, err = run_python(_rel(SCRIPT), "optim", fresh=False)
    assert rc == 1 and INPLACE in err, err[-500:]
    d = _diagnosis("optim")
    assert (d["culprit"]["file"], d["culprit"]["line"]) == (_rel(TRAINER), line_of(TRAINER, "optimizer.step()"))
    assert d["culprit"]["library"].startswith("torch/optim/"), d["culprit"]
    assert (d["backward"]["file"], d["backward"]["line"]) == (_rel(TRAINER), line_of(TRAINER, "loss.backward()"))


def test_classification_by_location(tmp_path):
    user = UserCode(str(SCRIPT))
    elsewhere = tmp_path / "src" / "pkg" / "mod.py"
    assert str(SCRIPT) in user and str(MODEL) in user and str(elsewhere) in user
    assert "<stdin>" in user
    for library_file in (torch.__file__, sys.modules["torch.optim.sgd"].__file__, os.__file__, json.__file__,
                         pytest.__file__, warnings.__file__, sys.modules["tensorscope.instrument.frames"].__file__):
        assert library_file not in user, library_file
    for pseudo in ("<frozen runpy>", "<string>", ""):
        assert pseudo not in user


@pytest.mark.parametrize("segment, op, through", [
    ("torch.relu_(h)", "relu_", "h"),
    ("tmp.mul_(2)", "mul_", "tmp"),
    ("y.detach().zero_()", "zero_", "y.detach()"),
    ("x[0] = 1", "setitem", "x"),
    ("x += 1", "add_", "x"),
    ("torch.zeros(3, device='cuda')", "zeros", None),  # a literal names no tensor
    ("torch.tensor([1.0, -2.0], device='cuda')", "tensor", None),
    ("torch.full((2, 3), -1, device='cuda')", "full", None),
])
def test_the_expression_written_through_is_never_a_literal(segment, op, through):
    """A culprit's `(through ...)` names the expression the program wrote through; a factory call's first
    argument is a size or data literal, not an alias (a CUDA factory call on a build without CUDA said
    "(through `3`)")."""
    from tensorscope.instrument.frames import receiver

    assert receiver(segment, op) == through


@pytest.mark.skipif(sys.version_info < (3, 11), reason="co_positions is new in Python 3.11")
def test_a_cached_segment_is_what_the_instruction_position_slices(tmp_path):
    """The expression an instruction executes (``call_segment``, cached by code and then by instruction) is,
    on the first read and on every read after it, the text Python's own ``co_positions`` gives for that
    instruction; two lines of equal text quote one string; the cache empties when the program ends."""
    from tensorscope.instrument import frames

    path = tmp_path / "loop.py"
    path.write_text("def f(probe):\n    out = []\n    for _ in range(3):\n        out.append(probe( ))\n"
                    "        out.append(probe())\n        out.append(probe())\n    return out\n")
    scope: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), scope)

    def probe():
        caller = sys._getframe(1)
        line, end_line, col, end_col = list(caller.f_code.co_positions())[caller.f_lasti // 2]
        assert line == end_line
        text = path.read_text().splitlines()[line - 1][col:end_col]
        return text, frames.call_segment(caller)

    got = scope["f"](probe)
    assert [seg for _, seg in got] == [text for text, _ in got] == ["probe( )", "probe()", "probe()"] * 3
    assert got[1][1] is got[2][1]  # two lines, one string
    again = scope["f"](probe)
    assert [seg for _, seg in again] == [seg for _, seg in got]
    frames.release_caches()
    assert not frames._SEGMENTS
