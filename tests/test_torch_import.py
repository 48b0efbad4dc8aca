"""tensorscope imports torch when the program does (NOTE [Instrumenting at the program's import of torch] in
tensorscope/torch_import.py).

Each test runs a fresh `python PROG` and a fresh `python -m tensorscope run|explain -o REPORT PROG` (the fork
server of tests/_cli.py has torch imported already, which is what these tests must not have) and compares
what the program printed, raised and exited with; the report is read from its file.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _cli import DEFAULT_TIMEOUT, _env, load_report, validate_against_schema

PY = sys.executable


def _run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=DEFAULT_TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def pair(tmp_path: Path, source: str, *args: str, command: str = "run"):
    """(python's (rc, stdout, stderr), tensorscope's, the report) for PROG written from ``source``."""
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(source))
    report = tmp_path / "r.json"
    with ThreadPoolExecutor(2) as pool:
        py = pool.submit(_run, [PY, str(prog), *args], tmp_path)
        ts = pool.submit(_run, [PY, "-m", "tensorscope", command, "-o", str(report), str(prog), *args], tmp_path)
        py, ts = py.result(), ts.result()
    doc = load_report(report.read_text()) if report.exists() else None
    if doc is not None:
        validate_against_schema(doc)
    return py, ts, doc


def line_of(tmp_path: Path, marker: str) -> int:
    lines = (tmp_path / "prog.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line)


def test_a_program_that_never_imports_torch(tmp_path):
    """Nothing of torch is imported, at any time: the program, its atexit handlers and the report say so."""
    py, ts, doc = pair(tmp_path, """
        import atexit, json, sys
        atexit.register(lambda: print("at exit", sorted(m for m in sys.modules if m.split(".")[0] == "torch")))
        print("start", "torch" in sys.modules, json.dumps([1, 2]))
        print("to stderr", file=sys.stderr)
        sys.exit(3)
    """)
    assert py == (3, "start False [1, 2]\nat exit []\n", "to stderr\n")
    assert ts == py
    assert doc["program"]["exit_status"] == 3
    assert doc["torch_version"] is None and doc["recording"] is None
    assert "the program never imported torch: nothing to record" in doc["notes"]


def test_torch_loaded_without_an_import_is_never_called_clean(tmp_path):
    """A program that runs torch's ``__init__`` itself (importlib's module_from_spec and exec_module): nothing
    asks the import system for ``torch``, so nothing is watched or recorded. The report used to say "the
    program never imported torch", and a program that ended well was "clean"; now it says how torch came in
    and that nothing was recorded (NOTE [torch loaded without an import] in torch_import.py). The program runs
    as under python."""
    from tensorscope.render.text import render

    py, ts, doc = pair(tmp_path, """
        import importlib.util
        import sys

        spec = importlib.util.find_spec("torch")
        torch = importlib.util.module_from_spec(spec)
        sys.modules["torch"] = torch
        spec.loader.exec_module(torch)
        x = torch.ones(3, requires_grad=True)
        print((x * 2).sum().item())
    """)
    assert py == (0, "6.0\n", ""), py
    assert ts == py
    assert doc["program"]["exit_status"] == 0 and doc["recording"] is None
    assert not any("never imported torch" in n for n in doc["notes"]), doc["notes"]
    assert any("loaded in a way tensorscope does not watch" in n for n in doc["notes"]), doc["notes"]
    verdict = render(doc).splitlines()[1]
    assert verdict.startswith("not recorded: torch was loaded in a way tensorscope does not watch"), verdict


def test_torch_imported_late_in_a_thread_is_instrumented(tmp_path):
    """torch imported by another thread, used later in a function of the main thread: the program sees
    sys.modules as under python, and the version error's culprit line is still found."""
    source = """
        import sys
        import threading

        def load():
            global torch, F
            import torch.nn.functional as F  # the first import of torch
            import torch

        def train():
            x = torch.ones(4, requires_grad=True)
            y = torch.sigmoid(x)
            y.mul_(2)  # culprit
            y.sum().backward()

        print("before", "torch" in sys.modules)
        t = threading.Thread(target=load)
        t.start()
        t.join()
        print("after", "torch" in sys.modules, "torch.nn.functional" in sys.modules)
        train()
    """
    py, ts, doc = pair(tmp_path, source, command="explain")
    assert py[0] == 1 and py[1] == "before False\nafter True True\n"
    assert "modified by an inplace operation" in py[2].splitlines()[-1]
    assert ts[1] == py[1] and ts[2].splitlines()[-1] == py[2].splitlines()[-1]
    assert ts[0] == 1  # explain: a diagnosis
    d = doc["diagnosis"]
    assert d["kind"] == "inplace-modified-saved-tensor"
    assert d["culprit"]["line"] == line_of(tmp_path, "# culprit")
    assert doc["torch_version"] is not None


def test_a_failing_import_of_torch_is_as_under_python(tmp_path):
    """A broken torch (its __init__ raises): the traceback the program prints of it, its retry and the
    uncaught error are python's, byte for byte; the report says the import failed."""
    broken = tmp_path / "broken" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise OSError("libtorch_cpu.so: cannot open shared object file")\n')
    py, ts, doc = pair(tmp_path, """
        import sys, traceback
        sys.path.insert(0, sys.argv[1])
        try:
            import torch
        except OSError:
            traceback.print_exc()
        print("torch" in sys.modules)
        import torch
    """, str(tmp_path / "broken"))
    assert py[0] == 1 and "Traceback" in py[2] and py[1] == "False\n"
    assert ts == py
    assert "the program's import of torch failed: nothing to record" in doc["notes"]


def test_an_import_of_torch_retried_after_its_init_raised_is_watched(tmp_path):
    """torch's own __init__ raises ImportError once (its C extension's import halted by `sys.modules["torch._C"] =
    None`), the program catches it and imports torch again. Up to torch 2.13 the retry succeeds under python and
    trains: it must be recorded (the finder is put back when an import fails); torch 2.15 refuses a second import
    ("can only be initialized once per process"): then the report says the import failed. The output, traceback and
    exit status are python's either way (NOTE [Instrumenting at the program's import of torch])."""
    py, ts, doc = pair(tmp_path, """
        import sys
        sys.modules["torch._C"] = None
        try:
            import torch
        except ImportError as e:
            print("first import:", type(e).__name__)
        del sys.modules["torch._C"]
        import torch
        x = torch.ones(3, requires_grad=True)
        (x * 2).sum().backward()
        print("grad", x.grad.tolist())
    """)
    assert py[1].startswith("first import: ModuleNotFoundError\n"), py
    assert ts == py, (ts, py)
    backwards = [e for e in doc["events"] if e.get("kind") == "backward"]
    if py[0] == 0:  # the retry imported torch and trained under python
        assert py[1].endswith("grad [2.0, 2.0, 2.0]\n"), py
        assert len(backwards) == 1 and not any("nothing to record" in n for n in doc["notes"]), doc["notes"]
    else:
        assert "the program's import of torch failed: nothing to record" in doc["notes"], doc["notes"]
        assert backwards == []


def test_a_spawned_child_when_the_parent_imports_torch_after_it(tmp_path):
    """multiprocessing spawn before the program's import of torch: the child runs (plain python), its exit
    status is in the report, and what the parent does with torch afterwards is recorded."""
    py, ts, doc = pair(tmp_path, """
        import multiprocessing as mp
        import sys

        def child():
            sys.exit(3)

        if __name__ == "__main__":
            p = mp.get_context("spawn").Process(target=child)
            p.start()
            p.join()
            print("child", p.exitcode, "torch" in sys.modules)
            import torch
            w = torch.ones(2, requires_grad=True)
            (w * 2).sum().backward()
            print("grad", w.grad.tolist())
    """)
    assert py == (0, "child 3 False\ngrad [2.0, 2.0]\n", "")
    assert ts == py
    children = doc["program"]["children"]
    # the spawned child, beside multiprocessing's resource tracker (exit 0, or still running)
    assert [c["exit_status"] for c in children if c["failed"]] == [3]
    assert all(c["exit_status"] in (0, None) for c in children if not c["failed"])
    assert doc["torch_version"] is not None
    assert any(e["kind"] == "backward" for e in doc["events"]), [e["kind"] for e in doc["events"]]


def test_torch_found_by_find_spec_before_the_program_imports_it(tmp_path):
    """``importlib.util.find_spec("torch")`` first (transformers, accelerate and lightning check torch is there
    that way): it used to take the one watched spec, so the real import went unwatched (the report said the
    program never imported torch) and --timeout, paused for torch's import, never fired again."""
    source = """
        import importlib.util
        import sys

        spec = importlib.util.find_spec("torch")
        print(type(spec).__name__, type(spec) is type(importlib.util.find_spec("json")), "torch" in sys.modules)
        import torch

        x = torch.ones(4, requires_grad=True)
        y = torch.sigmoid(x)
        y.mul_(2)  # culprit
        if sys.argv[1:] == ["loop"]:
            print("ready", flush=True)
            while True:
                (x * 2).sum().backward()
        y.sum().backward()
    """
    py, ts, doc = pair(tmp_path, source, command="explain")
    assert py[0] == 1 and py[1] == "ModuleSpec True False\n" and "modified by an inplace operation" in py[2]
    assert ts[1:] == py[1:] and ts[0] == 1
    assert doc["torch_version"] is not None
    d = doc["diagnosis"]
    assert d is not None and d["culprit"]["line"] == line_of(tmp_path, "# culprit"), d
    report = tmp_path / "loop.json"
    rc, out, err = _run([PY, "-m", "tensorscope", "run", "--timeout", "1", "-o", str(report), str(tmp_path / "prog.py"),
                         "loop"], tmp_path)
    assert (rc, out) == (124, py[1] + "ready\n"), (rc, out, err)
    assert "stopped after --timeout 1 s: the report is partial" in load_report(report.read_text())["notes"]


def test_ctrl_c_while_tensorscope_installs_itself(tmp_path):
    """SIGINT lands inside the install, which runs inside the program's ``import torch`` (a finder of the
    program's raises it at the first import after torch's own: under python, the program's next import; under
    tensorscope, one of the install's). It used to stop the install half way and the report said "the program
    never imported torch"; now the KeyboardInterrupt comes out of the import once the install is whole: the
    program catches it as under python, and its error after it is recorded and diagnosed."""
    py, ts, doc = pair(tmp_path, """
        import signal
        import sys


        class Trip:
            def find_spec(self, name, path=None, target=None):
                spec = getattr(sys.modules.get("torch"), "__spec__", None)
                if spec is not None and not getattr(spec, "_initializing", True):
                    sys.meta_path.remove(self)
                    signal.raise_signal(signal.SIGINT)
                return None


        sys.meta_path.insert(0, Trip())
        try:
            import torch
            import json.tool
        except KeyboardInterrupt:
            print("KeyboardInterrupt during the imports", "torch" in sys.modules)
        import torch

        x = torch.ones(3, requires_grad=True)
        y = x.sigmoid()
        y.mul_(2)  # culprit
        y.sum().backward()
    """, command="explain")
    assert py[0] == 1 and py[1] == "KeyboardInterrupt during the imports True\n", py
    assert ts[1:] == py[1:] and ts[0] == 1, ts
    assert doc["torch_version"] is not None, doc["notes"]
    d = doc["diagnosis"]
    assert d is not None and d["culprit"]["line"] == line_of(tmp_path, "# culprit"), d


def test_the_origin_mode_goes_on_the_main_thread_when_torch_is_imported_on_another(tmp_path, monkeypatch):
    """TENSORSCOPE_ORIGIN_MODE=1: torch's dispatch-mode stack is per thread, and the mode used to be pushed on
    the importing thread, where it saw none of the main thread's ops (the NaN's origin was lost: the backward
    line was named). Ignored before torch 2.11 (NOTE [The origin mode crashes torch before 2.11]), where the
    graph names the same line."""
    monkeypatch.setenv("TENSORSCOPE_ORIGIN_MODE", "1")
    py, ts, doc = pair(tmp_path, """
        import threading


        def load():
            import torch  # the program's first import of torch, on a worker thread


        t = threading.Thread(target=load)
        t.start()
        t.join()
        import torch

        w = torch.zeros(3, requires_grad=True)
        x = torch.log(w * 0)  # origin
        x.sum().backward()
        print(w.grad.isnan().any().item())
    """, command="explain")
    assert py == (0, "True\n", "")
    assert ts[1:] == py[1:]
    nf = [h for h in doc.get("hazards") or [] if h["kind"] == "silent-non-finite-value"]
    assert nf and nf[0]["culprit"]["line"] == line_of(tmp_path, "# origin"), nf
