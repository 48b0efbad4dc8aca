"""Launching as python does: `run [OPTIONS] PROGRAM [ARGS...]`, `-m module`, `--`, compared byte for byte.

Each case runs plain python and `python -m tensorscope run -o r.json ...` from the same folder,
with the same environment, and compares exit status, stdout and stderr. Python runs as itself (a fresh
interpreter: the reference); tensorscope's runs fork from one process that imported torch once
(tests/_forked.py: ``sys.argv``, ``sys.path[0]`` and ``__main__`` as `python -m tensorscope` gives them).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from _cli import _env, load_report, run_many, validate_against_schema

PY = sys.executable
TIMEOUT = 900  # guards a hang, not speed: a niced run on a loaded 2-core machine takes minutes

FILES = {
    # a script whose arguments look like tensorscope's own options
    "prog.py": """
        import sys, torch
        x = torch.ones(2, requires_grad=True)
        print("argv", sys.argv, "name", __name__, "path0", sys.path[0])
    """,
    # a module at the top of the working directory
    "mod.py": """
        import sys, torch
        print("mod", __name__, __spec__.name, __file__, repr(__package__), sys.argv, sys.path[0])
    """,
    # a package run with -m: its __main__, relative imports, a traceback through runpy's frames
    "pkg/__init__.py": """
        import sys
        print("pkg init, argv", sys.argv)
    """,
    "pkg/__main__.py": """
        import sys
        from .util import scale
        from . import util
        print("main", __name__, __spec__.name, __package__, __file__, sys.argv, sys.path[0])
        print([k for k in globals() if k.startswith("__")])  # the order too
        print(scale(sys.argv[1:]))
        util.boom()
    """,
    "pkg/util.py": """
        import torch

        def scale(args):
            return (torch.ones(2) * len(args)).tolist()

        def boom():
            raise ValueError("boom from " + __name__)
    """,
    # a module inside the package, run as `python -m pkg.tool`
    "pkg/tool.py": """
        import sys
        from .util import scale
        print("tool", __name__, __spec__.name, __package__, sys.argv[1:], scale(sys.argv))
        sys.exit(3)
    """,
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("launch")
    for name, code in FILES.items():
        path = root / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(textwrap.dedent(code).lstrip())
    return root


def _run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def _text(result):
    """(status, stdout, stderr) as run_many reads them (text, undecodable bytes replaced)."""
    rc, out, err = result
    return rc, out.decode(errors="replace"), err.decode(errors="replace")


# (python's arguments, tensorscope's arguments after `run -o r.json`)
CASES = {
    "program args that look like options": (
        ["prog.py", "--json", "-o", "x.txt", "--help", "-m", "mod", "--", "--device", "tpu"],
        ["prog.py", "--json", "-o", "x.txt", "--help", "-m", "mod", "--", "--device", "tpu"]),
    "-- before the program": (["prog.py", "a", "--json"], ["--", "prog.py", "a", "--json"]),
    "-- right after the program": (["prog.py", "a", "--json"], ["prog.py", "--", "a", "--json"]),
    "-m module": (["-m", "mod", "-o", "y", "--json"], ["-m", "mod", "-o", "y", "--json"]),
    "-m package with __main__ and relative imports": (["-m", "pkg", "a", "-m", "b"], ["-m", "pkg", "a", "-m", "b"]),
    "-m module of a package": (["-m", "pkg.tool", "--flag"], ["-m", "pkg.tool", "--flag"]),
    "-m missing module": (["-m", "nosuchmod_ts"], ["-m", "nosuchmod_ts"]),
    "-m missing submodule": (["-m", "pkg.nosuch"], ["-m", "pkg.nosuch"]),
}


@pytest.fixture(scope="module")
def results(folder):
    reports = [folder / f"r{i}.json" for i in range(len(CASES))]
    with ThreadPoolExecutor(2) as pool:
        many = pool.submit(run_many, [("tensorscope", "run", "-o", str(report), *ts_args, {"cwd": folder})
                                      for report, (_, ts_args) in zip(reports, CASES.values())])
        py = [pool.submit(_run, [PY, *py_args], folder) for py_args, _ in CASES.values()]
        py = [_text(f.result()) for f in py]
        ts = [tuple(r[:3]) for r in many.result()]
    return {name: (p, t, report) for name, p, t, report in zip(CASES, py, ts, reports)}


@pytest.mark.parametrize("case", list(CASES))
def test_launch_is_byte_identical_to_python(case, results):
    py, ts, report = results[case]
    assert ts == py, f"{case}: python {py!r}\ntensorscope {ts!r}"
    doc = load_report(report.read_text())  # a report is always written
    validate_against_schema(doc)
    assert doc["program"]["exit_status"] == py[0]


def test_python_side_of_the_cases(results, folder):
    """The cases test what they claim: python itself shows these facts."""
    rc, out, _ = results["-m package with __main__ and relative imports"][0]
    assert rc == 1 and f"main __main__ pkg.__main__ pkg {folder / 'pkg' / '__main__.py'}" in out
    assert "[3.0, 3.0]" in out
    rc, _, err = results["-m missing module"][0]
    assert (rc, err) == (1, f"{PY}: No module named nosuchmod_ts\n")
    rc, out, _ = results["-- right after the program"][0]
    assert "'prog.py', 'a', '--json'" in out


def test_module_report_records_the_module(results, folder):
    _, _, report = results["-m package with __main__ and relative imports"]
    doc = load_report(report.read_text())
    prog = doc["program"]
    assert prog["module"] == "pkg"
    assert prog["path"] == str(folder / "pkg" / "__main__.py")
    assert prog["argv"] == [prog["path"], "a", "-m", "b"]
    assert prog["exception"]["type"] == "ValueError"
    _, _, report = results["program args that look like options"]
    assert json.loads(report.read_text())["program"]["module"] is None


def test_explain_dash_m_pinpoints_a_line_in_the_package(folder):
    (folder / "bug").mkdir()
    (folder / "bug" / "__init__.py").write_text("")
    (folder / "bug" / "model.py").write_text(textwrap.dedent("""
        import torch

        def forward(a):
            out = a.sigmoid()
            out.detach().zero_()
            return out
    """).lstrip())
    (folder / "bug" / "__main__.py").write_text(textwrap.dedent("""
        import torch
        from .model import forward
        a = torch.ones(3, requires_grad=True)
        forward(a).sum().backward()
    """).lstrip())
    rc, out, err = _run([PY, "-m", "tensorscope", "explain", "--json", "-m", "bug"], folder)
    doc = load_report(out)
    d = doc["diagnosis"]
    assert rc == 1 and d["kind"] == "inplace-modified-saved-tensor", err
    assert (d["culprit"]["file"], d["culprit"]["line"]) == ("bug/model.py", 5)
    assert (d["saved_by"]["file"], d["saved_by"]["line"]) == ("bug/model.py", 4)
    assert doc["program"]["module"] == "bug"


def test_help_and_usage_errors(folder):
    usage = (["run", "--bogus", "prog.py"], ["run"], ["run", "-m"], ["explain", "-m"],
             ["explain", "--message", "x", "prog.py"])
    (rc, out, err, _), *errors = run_many([("tensorscope", *args, {"cwd": folder})
                                           for args in (["run", "--help"], *usage)])
    assert rc == 0 and "[PROGRAM] [ARGS]..." in out and "-m" in out and "--fail-on" in out
    for args, (rc, out, err, _) in zip(usage, errors):
        lines = err.splitlines()
        assert rc == 2 and len(lines) == 1 and lines[0].startswith("tensorscope: "), (args, out, err)
