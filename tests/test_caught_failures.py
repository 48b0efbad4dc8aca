"""A failure the program caught is never the diagnosis (issue 10, item 12b).

`try: loss.backward() except RuntimeError: ...` is how tests and retry loops expect a failure.
The diagnosis is about the exception that ended the program, and a program that exits 0 has none.
Expected facts come from plain python (exit status, the uncaught exception), never from tensorscope.
"""

from __future__ import annotations

import json

import pytest

from _cli import load_report, run_cli, run_python, validate_against_schema

# Breaks backward (sigmoid's saved output written in place), then catches it.
_CAUGHT = """import torch

a = torch.randn(3, requires_grad=True)
out = a.sigmoid()
out.detach().zero_()
try:
    out.sum().backward()
except RuntimeError:
    print("caught the expected failure")
"""
# ... then dies of an AssertionError without a message (an empty text matched any failure before).
THEN_ASSERT = _CAUGHT + """b = torch.ones(2)
assert b.sum().item() == 3.0
"""
# ... then exits 0 after a backward that works.
THEN_CLEAN = _CAUGHT + """b = torch.randn(3, requires_grad=True)
(b * 2).sum().backward()
print(b.grad.tolist())
"""

# ... then dies of another version error, written through an alias: that one is diagnosed, whole.
THEN_VERSION = _CAUGHT + """c = torch.randn(3, requires_grad=True)
e = c.exp()
head = e[:2]
head.mul_(3)
e.sum().backward()
"""
# Dies of a version error; a `finally:` then catches a failure of its own after the fatal one.
FATAL_THEN_CAUGHT = """import torch

a = torch.randn(3, requires_grad=True)
out = a.sigmoid()
out.mul_(2)
try:
    out.sum().backward()
finally:
    leaf = torch.ones(2, requires_grad=True)
    try:
        leaf.add_(1)
    except RuntimeError as e:
        print("caught:", str(e)[:40])
"""

# A worker thread dies of a version error (sigmoid's saved output doubled in place) while the main
# thread goes on and exits 0: python prints the thread's traceback through threading.excepthook.
THREAD_DIES = """import threading
import torch

def work():
    a = torch.randn(3, requires_grad=True)
    out = a.sigmoid()
    out.mul_(2)
    out.sum().backward()

t = threading.Thread(target=work, name="worker")
t.start()
t.join()
print("main went on")
"""


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    root = tmp_path_factory.mktemp("caught")
    paths = {}
    for name, source in (("then_assert", THEN_ASSERT), ("then_clean", THEN_CLEAN), ("then_version", THEN_VERSION),
                         ("fatal_then_caught", FATAL_THEN_CAUGHT), ("thread_dies", THREAD_DIES)):
        paths[name] = root / f"{name}.py"
        paths[name].write_text(source)
    return paths


def test_caught_failure_then_another_exception(programs):
    path = programs["then_assert"]
    rc_py, _, err_py = run_python(path, fresh=False)
    assert rc_py == 1 and err_py.rstrip().endswith("AssertionError"), err_py
    rc, out, err, doc = run_cli("explain", "--json", str(path))
    assert rc == 1 and doc is not None, (rc, err[-500:])
    assert validate_against_schema(doc)
    assert doc["program"]["exception"]["type"] == "AssertionError"
    d = doc["diagnosis"]
    assert d["kind"] == "other", d
    assert d["culprit"]["line"] == len(THEN_ASSERT.splitlines()), d["culprit"]
    assert "modified by an inplace operation" not in json.dumps(d)


def test_caught_failure_then_exit_0(programs, tmp_path):
    path = programs["then_clean"]
    rc_py, out_py, _ = run_python(path, fresh=False)
    assert rc_py == 0 and "caught the expected failure" in out_py
    rc, out, err, doc = run_cli("explain", "--json", str(path))
    assert rc == 0 and doc is not None, (rc, out[:500], err[-500:])
    assert validate_against_schema(doc)
    assert doc["diagnosis"] is None and doc["hazards"] == [], doc["diagnosis"]
    report = tmp_path / "r.json"
    rc, out, err, _ = run_cli("run", "-o", str(report), str(path))
    assert (rc, out) == (0, out_py), (rc, err[-500:])
    doc = load_report(report.read_text())
    assert validate_against_schema(doc)
    assert doc["diagnosis"] is None
    # the verdict neither diagnoses the caught failure nor says every backward call succeeded
    rc, out, err, _ = run_cli("explain", str(report))
    assert rc == 0, err[-500:]
    assert "1 failed and the program went on" in out and "all succeeded" not in out, out


def test_thread_died_of_a_failure_is_not_said_caught(programs):
    """The thread did not catch its failure: the verdict must not say the program caught it."""
    path = programs["thread_dies"]
    rc_py, out_py, err_py = run_python(path, fresh=False)
    assert rc_py == 0 and out_py == "main went on\n", (rc_py, out_py)
    assert "Exception in thread worker" in err_py and "modified by an inplace operation" in err_py, err_py
    rc, out, err, _ = run_cli("explain", str(path))
    assert rc == 0 and out.startswith(out_py) and err == err_py, (rc, out, err[-800:])
    words = " ".join(out.split())  # the verdict wraps at the terminal's width
    assert "1 backward call, 1 failed and the program went on (caught, or a thread died of it)" in words, out
    assert "caught it" not in words and "all succeeded" not in words, out


def _line(source: str, code: str) -> int:
    return source.splitlines().index(code) + 1


@pytest.mark.parametrize("name,source,culprit,alias", [
    ("then_version", THEN_VERSION, "head.mul_(3)", "head"),
    ("fatal_then_caught", FATAL_THEN_CAUGHT, "out.mul_(2)", "out"),
])
def test_the_failure_that_ended_the_program_is_diagnosed_whole(programs, name, source, culprit, alias):
    """A caught failure before the fatal one, or after it (NOTE [The last failure, not the first])."""
    rc_py, out_py, err_py = run_python(programs[name], fresh=False)
    assert rc_py == 1 and "modified by an inplace operation" in err_py.strip().splitlines()[-1], err_py
    rc, out, err, doc = run_cli("explain", "--json", str(programs[name]))
    assert rc == 1 and doc is not None, (rc, err[-500:])
    assert validate_against_schema(doc)
    d = doc["diagnosis"]
    assert d["kind"] == "inplace-modified-saved-tensor", d
    assert (d["culprit"]["line"], d["culprit"]["alias"]) == (_line(source, culprit), alias), d["culprit"]
    assert d["backward"]["line"] == _line(source, [ln for ln in source.splitlines() if "backward()" in ln][-1])
