"""`--fail-on hazard|diagnosis` (CI), `--version` and shell completion, through the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from _cli import _env, run_many

PY = sys.executable
TS = [PY, "-m", "tensorscope"]
FAIL_ON = 5  # ExitCode.FAIL_ON, documented in the README

PROGRAMS = {
    # a hazard: the saved output of exp changed through .data; backward succeeds with wrong gradients
    "hazard.py": """
        import torch
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()
        y.data.mul_(2)
        y.sum().backward()
        print("grad", x.grad.tolist())
    """,
    # a failure diagnosis (no hazard)
    "failure.py": """
        import torch
        a = torch.tensor([1.0, 2.0], requires_grad=True)
        out = a.sigmoid()
        out.detach().zero_()
        out.sum().backward()
    """,
    # nothing to find; the program's own status is kept
    "clean.py": """
        import sys, torch
        x = torch.ones(2, requires_grad=True)
        (x * 2).sum().backward()
        print("clean")
        sys.exit(3)
    """,
}


def _run(args, cwd, env=None):
    p = subprocess.run(args, cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=900)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("failon")
    for name, code in PROGRAMS.items():
        (cwd / name).write_text(textwrap.dedent(code).lstrip())
    python = {"py hazard": "hazard.py", "py failure": "failure.py", "py clean": "clean.py"}
    # tensorscope's runs fork from one process that imported torch once (tests/_forked.py); python's are
    # plain interpreters, the reference
    ts = {
        "hazard/hazard": ["run", "-o", "h1.json", "--fail-on", "hazard", "hazard.py"],
        "hazard/diagnosis": ["run", "-o", "h2.json", "--fail-on", "diagnosis", "hazard.py"],
        "failure/hazard": ["run", "-o", "f1.json", "--fail-on", "hazard", "failure.py"],
        "failure/diagnosis": ["run", "-o", "f2.json", "--fail-on", "diagnosis", "failure.py"],
        "clean/diagnosis": ["run", "-o", "c.json", "--fail-on", "diagnosis", "clean.py"],
        "explain failure/hazard": ["explain", "-o", "e.json", "--fail-on", "hazard", "failure.py"],
        "explain text/diagnosis": ["explain", "--fail-on", "diagnosis", "--message",
                                   "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn"],
        "bad value": ["run", "--fail-on", "warnings", "clean.py"],
    }
    with ThreadPoolExecutor(2) as pool:
        many = pool.submit(run_many, [("tensorscope", *args, {"cwd": cwd}) for args in ts.values()])
        futures = {k: pool.submit(_run, [PY, prog], cwd) for k, prog in python.items()}
        results = {k: f.result() for k, f in futures.items()}
        results.update({k: tuple(r[:3]) for k, r in zip(ts, many.result())})
        return cwd, results


def test_fail_on_hazard_and_diagnosis_keep_the_programs_output(runs):
    cwd, r = runs
    py_hazard, py_failure, py_clean = r["py hazard"], r["py failure"], r["py clean"]
    assert (py_hazard[0], py_failure[0], py_clean[0]) == (0, 1, 3)
    # found: exit FAIL_ON, the program's stdout and stderr untouched
    assert r["hazard/hazard"] == (FAIL_ON, *py_hazard[1:])
    assert r["hazard/diagnosis"] == (FAIL_ON, *py_hazard[1:])
    assert r["failure/diagnosis"] == (FAIL_ON, *py_failure[1:])
    # not found: the program's own exit status
    assert r["failure/hazard"] == py_failure
    assert r["clean/diagnosis"] == py_clean
    for report in ("h1.json", "h2.json", "f1.json", "f2.json", "c.json"):
        assert (cwd / report).exists()


def test_fail_on_with_explain(runs):
    _, r = runs
    assert r["explain failure/hazard"][0] == 1  # a diagnosis, no hazard: explain's usual "found"
    assert r["explain text/diagnosis"][0] == FAIL_ON


def test_fail_on_bad_value_is_a_usage_error(runs):
    _, r = runs
    rc, out, err = r["bad value"]
    assert rc == 2 and out == "" and err.count("\n") == 1 and "--fail-on" in err


def test_version_is_one_line():
    from importlib import metadata

    import torch

    from tensorscope import __version__

    rc, out, err = _run([*TS, "--version"], None)
    # the installed package's version (torch is not imported): PyPI's CUDA wheels carry no local part there
    # ("2.2.2") while torch.__version__ has one ("2.2.2+cu121"); the CPU index's wheels carry it in both
    version = metadata.version("torch")
    assert torch.__version__.startswith(version)
    assert (rc, out, err) == (0, f"tensorscope {__version__} (torch {version})\n", "")


def test_show_completion_for_bash():
    env = _env()
    env["SHELL"] = "/bin/bash"
    # typer's own switch for tests: the shell is the option's value, not found by walking the process tree
    # (shellingham), which finds no shell where the suite runs under a job runner with none above it
    env["_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"] = "1"
    rc, out, err = _run([*TS, "--show-completion", "bash"], None, env)
    assert rc == 0 and "complete" in out and "tensorscope" in out, (rc, out, err)
