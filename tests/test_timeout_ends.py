"""--timeout ends every run, and the program's signals are python's around the report (NOTE [--timeout ends the
run] in runner.py, NOTE [Signal handlers while the report is built] in exits.py).

Each test runs the real CLI on one small program; what python does comes from python's own run of it (or of
its twin without the fault, where python has no --timeout), and the report is read from its file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from _cli import _env, load_report, run_cli, run_many, run_python, validate_against_schema

PY = sys.executable
HANG = 300  # seconds: a guard against a hang only


def _write(tmp_path: Path, source: str) -> Path:
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(source))
    return prog


def _report(path: Path) -> dict:
    doc = load_report(path.read_text())
    validate_against_schema(doc)
    return doc


def _one_line_timeout(err: str, seconds: str) -> bool:
    lines = [line for line in err.splitlines() if line.strip()]
    return lines == [f"tensorscope: the program did not finish within {seconds} s and was stopped; the report is partial"]


def test_a_program_that_catches_the_timeout_and_a_thread_that_never_ends(tmp_path):
    """ProgramTimeout is raised once; a program that catches it and goes on, and a non-daemon thread that never
    ends, are then stopped as SIGTERM stops a run: the report, exit 124. Before, the first ran for ever (the
    alarm repeated each second into its `except BaseException`) and the second waited for its thread for ever."""
    prog = _write(tmp_path, """
        import sys, threading, time

        if sys.argv[1] == "thread":
            threading.Thread(target=lambda: time.sleep(10**6)).start()  # non-daemon: joined at exit
            print("ready", flush=True)
            while True:
                pass
        print("ready", flush=True)
        while True:
            try:
                while True:
                    pass
            except BaseException as e:
                print("caught", type(e).__name__, flush=True)
    """)
    for how, out in (("catch", "ready\ncaught ProgramTimeout\n"), ("thread", "ready\n")):
        report = tmp_path / f"{how}.json"
        rc, stdout, stderr, _ = run_cli("run", "--timeout", "1", "-o", str(report), str(prog), how, timeout=HANG)
        assert (rc, stdout) == (124, out), (how, rc, stdout, stderr)
        assert _one_line_timeout(stderr, "1"), (how, stderr)
        doc = _report(report)
        assert doc["program"]["exit_status"] == 124
        assert "stopped after --timeout 1 s: the report is partial" in doc["notes"], doc["notes"]
        assert not any("os._exit" in n for n in doc["notes"]), doc["notes"]


def test_sigterm_while_the_threads_are_joined(tmp_path):
    """The program's main code has ended and its non-daemon thread runs on: python dies by SIGTERM there;
    tensorscope held it until a report that never came (the join waits for ever). Now: the report, then SIGTERM."""
    prog = _write(tmp_path, """
        import threading, time

        threading.Thread(target=lambda: time.sleep(10**6)).start()
        print("ready", flush=True)
    """)
    report = tmp_path / "r.json"
    results = []
    for cmd in ([PY, str(prog)], [PY, "-m", "tensorscope", "run", "-o", str(report), str(prog)]):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=tmp_path,
                                start_new_session=True)
        try:
            assert proc.stdout.readline() == b"ready\n"
            time.sleep(0.3)  # the main code has returned: the thread is being joined
            os.kill(proc.pid, signal.SIGTERM)
            out, err = proc.communicate(timeout=HANG)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        results.append((proc.returncode, out, err))
    assert results[0] == (-signal.SIGTERM, b"", b""), results[0]
    assert results[1] == results[0], results[1]
    doc = _report(report)
    assert doc["program"]["exit_status"] == 128 + signal.SIGTERM
    assert "ended by SIGTERM: the report is partial" in doc["notes"], doc["notes"]


def test_a_signal_handler_raising_while_the_report_is_built(tmp_path):
    """The program's SIGUSR1 handler raises outside its own code while the report file does not exist, and a child
    sends SIGUSR1 every 2 ms from the program's last line (it closes the pipe the child waits on) until the report
    file exists: under python that handler would run, if at all, in the interpreter's shutdown, where its exception
    is printed as ignored. The report used to be lost ("internal error", exit 4). The exit status and output are
    python's without the signals (the twin run).
    The child's last signal may come after the report exists (it checks, then sends: on a loaded machine it can be
    descheduled in between): by then the program's handlers are back (its atexit handlers run), so the handler
    raises only while the report is missing, and the program's atexit handler waits for the child, so no signal
    comes once python has taken its handlers down (it died by SIGUSR1 then: both measured, with a delay put in
    between the child's check and its kill)."""
    prog = _write(tmp_path, """
        import atexit, os, signal, sys, time
        import torch

        report = sys.argv[1] if len(sys.argv) > 1 else None

        def handler(signum, frame):
            if frame is not None and frame.f_code.co_filename != __file__ and not os.path.exists(report):
                raise RuntimeError("the program's handler raised")

        x = torch.ones(8, requires_grad=True)
        (x * 2).sum().backward()
        print("grad", x.grad.sum().item())
        signal.signal(signal.SIGUSR1, handler)
        if report is not None:
            sys.stdout.flush()
            parent = os.getpid()
            r, w = os.pipe()
            child = os.fork()
            if child == 0:
                os.close(w)
                os.read(r, 1)  # end of file: the program's last line has run
                end = time.monotonic() + 60
                while not os.path.exists(report) and time.monotonic() < end:
                    os.kill(parent, signal.SIGUSR1)
                    time.sleep(0.002)
                os._exit(0)
            atexit.register(os.waitpid, child, 0)
            os.close(r)
            os.close(w)
    """)
    report = tmp_path / "r.json"
    # python's twin forks too (a report path that exists: the child sends nothing), so that it has the fork
    # warning where the process is multi-threaded at the fork (a GPU machine: autograd's device threads)
    py = run_python(prog, str(prog), cwd=tmp_path)
    assert py[:2] == (0, "grad 16.0\n") and (py[2] == "" or _FORK_WARNING in py[2]), py
    rc, out, err, _ = run_cli("run", "-o", str(report), str(prog), str(report), cwd=tmp_path, timeout=HANG)
    assert (rc, out) == py[:2], (rc, out, err)
    # a signal that came as the main code ended runs its handler where python's shutdown would (NOTE [A signal
    # between the program's end and the muting]): its exception printed as ignored, after python's fork warning
    warning, err = _pids(py[2]), _pids(err)
    assert err == warning or err.startswith(warning) and _ignored(err[len(warning):]), err
    doc = _report(report)
    assert doc["program"]["exit_status"] == 0 and doc["torch_version"], doc["program"]
    assert any(e.get("kind") == "backward" for e in doc["events"]), [e.get("kind") for e in doc["events"]]


def _ignored(err: str) -> bool:
    """The handler's exception as python's shutdown prints it (3.13.0: no "Exception ignored in" line)."""
    return (err.startswith("Exception ignored in: <module 'threading'") or sys.version_info >= (3, 13)) and \
        err.endswith("RuntimeError: the program's handler raised\n") and "tensorscope" not in err


_FORK_WARNING = "is multi-threaded, use of fork() may lead to deadlocks"


def _pids(text: str) -> str:
    import re

    return re.sub(r"\(pid=\d+\)", "(pid=N)", text)


def test_a_handler_whose_signal_comes_as_the_program_ends_runs_as_python_would_run_it(tmp_path):
    """NOTE [A signal between the program's end and the muting]: a thread calls ``_thread.interrupt_main(SIGUSR1)``
    once the program's last line has run (a busy wait on a list the line appends to, with a switch interval of
    1 us), so the signal comes as the program's main code ends: under python its handler then runs somewhere in
    the interpreter's shutdown (``threading._shutdown``, an atexit callback), where its exception is printed as
    "Exception ignored in ...", exit 0 (measured: each of those, from one run to the next). The handler raises
    only once the program's main code is over and while the report does not exist. Under tensorscope it must
    not run in tensorscope's frames and end the run (exit 1 and its traceback, as it could before the fix) nor
    lose the report: the exit status and stdout are python's without the thread (the twin run); stderr is empty
    or the handler's exception printed as ignored, as python's shutdown prints it."""
    prog = _write(tmp_path, """
        import os, signal, sys, threading, _thread
        import torch

        report = sys.argv[1] if len(sys.argv) > 1 else None
        MAIN = sys._getframe().f_code

        def handler(signum, frame):
            while frame is not None and frame.f_code is not MAIN:  # raise only once the main code is over
                frame = frame.f_back
            if frame is None and not os.path.exists(report):
                raise RuntimeError("the program's handler raised")

        box = []

        def trip():
            while not box:
                pass
            _thread.interrupt_main(signal.SIGUSR1)

        x = torch.ones(8, requires_grad=True)
        (x * 2).sum().backward()
        print("grad", x.grad.sum().item())
        signal.signal(signal.SIGUSR1, handler)
        if report is not None:
            sys.stdout.flush()
            sys.setswitchinterval(1e-6)
            threading.Thread(target=trip, daemon=True).start()
        box.append(1)
    """)
    py = run_python(prog, cwd=tmp_path)
    assert py == (0, "grad 16.0\n", ""), py
    reports = [tmp_path / f"r{i}.json" for i in range(4)]
    results = run_many([("tensorscope", "run", "-o", r, prog, r, {"cwd": tmp_path}) for r in reports], timeout=HANG)
    for r, (rc, out, err, *_) in zip(reports, results):
        assert (rc, out) == py[:2], (rc, out, err[-3000:])
        assert err == "" or _ignored(err), err
        doc = _report(r)
        assert doc["program"]["exit_status"] == 0 and any(e.get("kind") == "backward" for e in doc["events"])


def test_the_programs_handler_stops_its_threads_after_the_main_code(tmp_path):
    """A graceful stop: the program's SIGUSR1 (or SIGTERM) handler sets an event that its non-daemon worker
    thread waits for, and the signal comes once the main code has ended. Under python the handler runs while
    the interpreter joins the thread, which stops, and the process exits 0. tensorscope muted the handler there
    (SIGUSR1: the worker ran until it gave up) or died by SIGTERM (NOTE [The program's handlers while its
    threads are joined] in exits.py)."""
    prog = _write(tmp_path, """
        import os, signal, sys, threading, time
        import torch

        stop, main_done = threading.Event(), threading.Event()
        sig = getattr(signal, sys.argv[1])

        def handler(signum, frame):
            print("handler", signal.Signals(signum).name, flush=True)
            stop.set()

        def work():
            x = torch.ones(4, requires_grad=True)
            (x * 3).sum().backward()
            print("worker stopped" if stop.wait(30) else "worker gave up", flush=True)

        def later():
            main_done.wait()
            time.sleep(0.5)  # the main code has returned: its threads are being joined
            os.kill(os.getpid(), sig)

        signal.signal(sig, handler)
        threading.Thread(target=work).start()
        threading.Thread(target=later, daemon=True).start()
        print("main done", flush=True)
        main_done.set()
    """)
    for name in ("SIGUSR1", "SIGTERM"):
        py = run_python(prog, name, cwd=tmp_path, timeout=HANG)
        assert py == (0, f"main done\nhandler {name}\nworker stopped\n", ""), py
        report = tmp_path / f"{name}.json"
        rc, out, err, _ = run_cli("run", "-o", str(report), str(prog), name, cwd=tmp_path, timeout=HANG)
        assert (rc, out, err) == py, (name, rc, out, err)
        assert _report(report)["program"]["exit_status"] == 0


def test_a_handler_raising_while_the_threads_are_joined_is_printed_as_python_prints_it(tmp_path):
    """The program's main code has ended and its non-daemon thread runs on; then its SIGUSR1 handler raises, or
    a Ctrl-C comes (python's own handler). Python's shutdown stops waiting for the thread, prints the exception
    as "Exception ignored in: <module 'threading' ...>" with its traceback, cuts the thread off and exits 0.
    tensorscope stopped the wait silently (the handler's exception) or exited 130 (Ctrl-C); on 3.13 it then
    waited for the thread (NOTE [An exception while the program's threads are joined] in runner.py)."""
    prog = _write(tmp_path, """
        import os, signal, sys, threading, time

        class Boom(Exception):
            pass

        def handler(signum, frame):
            raise Boom("the program's handler raised")

        def work():
            time.sleep(60)
            print("worker done", flush=True)

        def later():
            main_done.wait()
            time.sleep(0.5)  # the main code has returned: its thread is being joined
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))

        main_done = threading.Event()
        signal.signal(signal.SIGUSR1, handler)
        threading.Thread(target=work).start()
        threading.Thread(target=later, daemon=True).start()
        print("main done", flush=True)
        main_done.set()
    """)  # no torch: what is checked is the end of the process (a fresh interpreter each)
    for name, last in (("SIGUSR1", "Boom: the program's handler raised"), ("SIGINT", "KeyboardInterrupt: ")):
        py = run_python(prog, name, cwd=tmp_path, timeout=HANG)
        assert py[:2] == (0, "main done\n") and py[2].splitlines()[-1].endswith(last), py  # 3.10: __main__.Boom
        assert py[2].startswith(("Exception ignored in: <module 'threading'", "Traceback")), py  # 3.13: no header
        report = tmp_path / f"{name}.json"
        rc, out, err, _ = run_cli("run", "-o", str(report), str(prog), name, cwd=tmp_path, timeout=HANG, fresh=True)
        assert (rc, out, err) == py, (name, rc, out, err)
        doc = _report(report)
        assert doc["program"]["exit_status"] == 0 and doc["program"]["exception"] is None, doc["program"]




def test_the_programs_own_handler_of_a_held_signal_while_the_report_is_built(tmp_path):
    """faults21: the program set its own SIGINT and SIGTERM handler, its main code has ended, and two SIGINTs and a
    SIGTERM come while tensorscope writes the report: `run --json` blocks writing a report bigger than the pipe that
    this test reads only once it has sent them (under python, where there is no report, the program's atexit
    callbacks wait for this test's stdin meanwhile). Python runs the handler in its shutdown and keeps the exit
    status (0); the handler's exception is printed as ignored. tensorscope held the first as a Ctrl-C of its own
    (it would have died by it after the report, exit 130), and the second killed the process at once with no
    report. Now the report is written, whole, and the handler runs where python's shutdown runs it
    (``threading._shutdown``): the same exit status and output, the exception printed as ignored (NOTE [The
    program's own handler of a held signal while the report is built] in exits.py)."""
    prog = _write(tmp_path, """
        import atexit, signal, sys
        import torch

        MAIN, ran = sys._getframe().f_code, []

        def handler(signum, frame):
            if signum not in ran:
                print("handler ran", signal.Signals(signum).name, file=sys.stderr, flush=True)
            ran.append(signum)
            while frame is not None and frame.f_code is not MAIN:
                frame = frame.f_back
            if len(ran) == 1 and frame is None:  # once the main code is over
                raise RuntimeError("the program's handler raised")

        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)
        x = torch.ones(8, requires_grad=True)
        (x * 2).sum().backward()
        kept = [torch.ones(2) * i for i in range(1000)]  # a report bigger than a pipe's buffer
        atexit.register(sys.stdin.read)  # python: the later signals come while this waits (the first raised)
        atexit.register(sys.stdin.read)  # python: the first signal comes while this waits (the last registered)
        print("grad", x.grad.sum().item(), file=sys.stderr, flush=True)
    """)
    results = []
    for cmd in ([PY, str(prog)], [PY, "-m", "tensorscope", "run", "--json", str(prog)]):
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=_env(), cwd=tmp_path)
        try:
            first = proc.stderr.readline()
            if "tensorscope" in cmd:
                out = os.read(proc.stdout.fileno(), 1)  # the report is being written; it blocks on the full pipe
            else:
                out = b""
                time.sleep(0.3)  # python's main code has returned: its atexit callback waits
            for sig in (signal.SIGINT, signal.SIGINT, signal.SIGTERM):
                os.kill(proc.pid, sig)
                time.sleep(0.05)
            rest, err = proc.communicate(timeout=HANG)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        results.append((proc.returncode, out + rest, (first + err).decode()))
    py, ts = results
    head, tail = "grad 16.0\nhandler ran SIGINT\n", "RuntimeError: the program's handler raised\nhandler ran SIGTERM\n"
    assert py[:2] == (0, b"") and py[2].startswith(head + "Exception ignored in") and py[2].endswith(tail), py
    assert ts[0] == py[0], (ts[0], ts[2][-3000:])
    # python's shutdown printed it in its atexit callback, tensorscope's in threading._shutdown: as ignored
    assert ts[2].startswith(head) and ts[2].endswith(tail), ts[2]
    assert _ignored(ts[2][len(head):-len("handler ran SIGTERM\n")]), ts[2]
    doc = load_report(ts[1].decode())
    validate_against_schema(doc)
    assert doc["program"]["exit_status"] == 0 and any(e.get("kind") == "backward" for e in doc["events"])
    assert len(ts[1]) > 2 * 65536  # whole (it parsed) and bigger than the pipe: written while the signals came
