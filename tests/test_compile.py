"""torch.compile: an eager bug around a compiled function gets the diagnosis it gets without compile.

The compiled function runs under backend="eager" and "aot_eager" (the latter traces with
torch's own TorchDispatchModes, which are not the program's: no note about them); inductor,
whose cold compile takes about a minute on two cores, only with TENSORSCOPE_SLOW=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from _cli import load_report, _env, line_of, run_many

PY = sys.executable

BUG = """
    import sys
    import torch


    def scale(x):
        return torch.sin(x) * 2 + 1


    backend = sys.argv[1] if len(sys.argv) > 1 else None
    f = torch.compile(scale, backend=backend) if backend else scale
    a = torch.randn(4, requires_grad=True)
    h = a.sigmoid()
    out = f(h.detach() + 1) + h * 3
    h.mul_(2)
    out.sum().backward()
"""

OWN_MODE = """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode


    class Count(TorchDispatchMode):
        calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.calls += 1
            return func(*args, **(kwargs or {}))


    x = torch.ones(3, requires_grad=True)
    with Count():
        y = (x * 2).sin()
    y.sum().backward()
    print(Count.calls > 0)
"""

MODE_NOTE = "saved tensors inside the program's TorchDispatchMode are not inspected"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("compile")
    (cwd / "bug.py").write_text(textwrap.dedent(BUG).lstrip())
    (cwd / "own_mode.py").write_text(textwrap.dedent(OWN_MODE).lstrip())
    return cwd


@pytest.fixture(scope="module")
def docs(folder):
    """{label: (status, document, stderr)} of `explain --json` on each run, forked from one process that
    imported torch once (run_many): torch.compile and its backends are imported in each run, as in a fresh one."""
    runs = {"plain": ["bug.py"], "eager": ["bug.py", "eager"], "aot_eager": ["bug.py", "aot_eager"],
            "own mode": ["own_mode.py"]}
    results = run_many([("tensorscope", "explain", "--json", *v, {"cwd": folder}) for v in runs.values()])
    return {k: (rc, doc, err) for k, (rc, _, err, doc) in zip(runs, results)}


def _same_diagnosis(plain, compiled, folder):
    d = plain["diagnosis"]
    assert d["kind"] == "inplace-modified-saved-tensor"
    assert d["culprit"]["line"] == line_of(folder / "bug.py", "h.mul_(2)")
    assert d["saved_by"]["line"] == line_of(folder / "bug.py", "h = a.sigmoid()")
    assert compiled["diagnosis"] == d


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_eager_bug_around_a_compiled_function(backend, docs, folder):
    rc, doc, err = docs[backend]
    assert rc == 1, err
    _same_diagnosis(docs["plain"][1], doc, folder)
    assert MODE_NOTE not in doc["notes"]  # torch.compile's own modes are not the program's
    assert any("torch.compile" in n for n in doc["notes"])


def test_the_programs_own_dispatch_mode_is_still_noted(docs):
    rc, doc, err = docs["own mode"]
    assert rc == 0 and "True" in err, err
    assert MODE_NOTE in doc["notes"]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TENSORSCOPE_SLOW"), reason="inductor's cold compile is slow; set TENSORSCOPE_SLOW=1")
def test_eager_bug_around_an_inductor_compiled_function(docs, folder, tmp_path):
    env_dir = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}  # cold: the compile-worker pool starts
    p = subprocess.run([PY, "-m", "tensorscope", "explain", "--json", "bug.py", "inductor"], cwd=folder,
                       env={**_env(), **env_dir}, capture_output=True, text=True, timeout=900)
    doc = load_report(p.stdout)
    _same_diagnosis(docs["plain"][1], doc, folder)
    assert MODE_NOTE not in doc["notes"]
