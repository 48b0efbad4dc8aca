"""A program's signal handler runs where python runs it, never inside tensorscope's code (issue 22, faults20;
NOTE [A signal handler that lands in tensorscope's code] in tensorscope/exits.py).

The landings are forced, not sampled: SIGUSR1 is marked as arrived from C (a weak reference callback, no Python
frame in between) inside a torch call that the program makes, so python runs the handler at the check right
after the call, and tensorscope's wrapper of that call is where the check falls. Each run is compared with
plain python's output and exit status; the report is checked for the call's event."""
from __future__ import annotations

import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _cli import DEFAULT_TIMEOUT, _env, load_report, validate_against_schema

REPO = Path(__file__).resolve().parents[1]
FAULTS = REPO / "tests" / "programs" / "faults"
PY = sys.executable


def _run(cmd, cwd, env=None):
    p = subprocess.run(cmd, cwd=cwd, env={**_env(), **(env or {})}, capture_output=True, timeout=DEFAULT_TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def _three_ways(prog: str, cwd, report):
    """``prog`` under python, under ``run -o report`` (the accelerator) and under ``explain`` (the pure-Python
    path), at once: each one's (exit status, stdout, stderr)."""
    with ThreadPoolExecutor(3) as pool:
        py = pool.submit(_run, [PY, prog], cwd)
        run = pool.submit(_run, [PY, "-m", "tensorscope", "run", "-o", str(report), prog], cwd)
        explain = pool.submit(_run, [PY, "-m", "tensorscope", "explain", prog], cwd, {"TENSORSCOPE_PURE_PYTHON": "1"})
        return py.result(), run.result(), explain.result()


def test_a_handler_landing_in_a_wrapper_runs_in_the_programs_code(tmp_path):
    """On main the handler ran in tensorscope's write wrapper (``tracker.write_call``), and the in-place
    ``detach_`` it interrupted was left out of the report's events (half recorded). Now it runs in the program's
    frame, as under python, under `run` (accelerator) and `explain` (pure Python path), the handler's own torch
    calls included, and the event is whole."""
    prog = str(FAULTS / "handler_in_a_wrapper.py")
    report = tmp_path / "r.json"
    py, run, explain = _three_ways(prog, tmp_path, report)
    assert py[0] == 0 and py[2] == b"", py
    lines = py[1].decode().splitlines()
    assert lines == [
        "handler given <module>:67, ran in handler_in_a_wrapper.py:<module>, [1.0, 1.0]",
        "Stop after detach_ True True",
        "handler given step:59, ran in handler_in_a_wrapper.py:step, [1.0, 1.0]",
        "Stop in the step True [0.699999988079071, 0.699999988079071, 0.699999988079071]",
        "end"], lines  # torch's facts: the node is gone (detach_ ran), the step's add_ ran
    assert run == py, run
    assert explain[0] == 0 and explain[1].startswith(py[1]), explain
    doc = load_report(report.read_text())
    validate_against_schema(doc)
    detach = [e for e in doc["events"] if e.get("line") == 67]
    assert [e.get("op") for e in detach] == ["detach_"], detach


def test_a_timeout_handler_interrupts_the_programs_waitpid(tmp_path):
    """``os.waitpid`` is wrapped (children.py): a signal held back there would not interrupt the wait it goes
    back to. Under python a SIGALRM handler's ``TimeoutError`` leaves ``waitpid`` at once; so it does here (with
    the wrapper not marked by ``frames.signals_run``: the child's 20 s, then the error after the wait)."""
    prog = str(FAULTS / "handler_in_waitpid.py")
    report = tmp_path / "r.json"
    with ThreadPoolExecutor(2) as pool:
        py = pool.submit(_run, [PY, prog], tmp_path)
        ts = pool.submit(_run, [PY, "-m", "tensorscope", "run", "-o", str(report), prog], tmp_path)
        py, ts = py.result(), ts.result()
    assert py == (0, b"TimeoutError: waited too long in <module> True\nchild killed: True\n", b""), py
    assert ts[0] == py[0] and ts[1] == py[1], ts
    assert load_report(report.read_text())["program"]["exit_status"] == 0
    assert signal.SIGALRM  # the platform has it (POSIX only, as the program)


def test_a_handler_landing_in_the_programs_code_that_tensorscope_calls_waits_for_the_program(tmp_path):
    """faults21: tensorscope's record of ``model.weight.data = new`` reads the new value, and a program's tensor
    subclass runs its ``__torch_function__`` for those reads (python never calls it there). A signal marked as arrived
    inside it ran the handler at once, inside tensorscope's frames, and its ``Stop`` was swallowed by tensorscope's
    code ("set" printed as if nothing came). Now the handler waits until tensorscope's code has returned and runs in
    the program's frame, and the ``Stop`` reaches the program's ``try`` with only the program's frames. Python never
    marks the signal (nothing calls ``__torch_function__`` there): what must match is the exit status, the program's
    stdout from the ``try`` on, and the write's event. The program's own ``new.mul_(2)`` after it (tensorscope's
    write wrapper calling the original, which calls ``__torch_function__``) runs the handler at once, as python."""
    prog = str(FAULTS / "handler_in_torch_function.py")
    report = tmp_path / "r.json"
    py, run, explain = _three_ways(prog, tmp_path, report)
    mul_ = b"mul_ stopped ['<module>', '__torch_function__', 'handler'] unchanged True\n"  # the program's own call: at once
    assert py == (0, b"set\n" + mul_ + b"end [3.0, 3.0, 3.0]\n", b"stops [] handler given [] data Tensor\n"), py
    caught = b"stops [['<module>', 'handler']] handler given ['<module>'] data Tensor\n"
    assert run == (0, mul_ + b"end [3.0, 3.0, 3.0]\n", caught), run
    assert explain[0] == 0 and explain[1].startswith(mul_ + b"end [3.0, 3.0, 3.0]\n") and explain[2] == caught, explain
    doc = load_report(report.read_text())
    validate_against_schema(doc)
    line = next(i for i, text in enumerate(Path(prog).read_text().splitlines(), 1) if text.strip() == "model.weight.data = new")
    assert [e.get("op") for e in doc["events"] if e.get("line") == line] == ["data_set"], doc["events"]
