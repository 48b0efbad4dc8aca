"""Faults: under `tensorscope run -o FILE` a program ends exactly as under `python prog.py`, and the
report survives (docs/faults.md).

Each test runs plain python and the real CLI on a program in tests/programs/faults/, compares the
exit status and output, and reads the report file. Expected values come from python's own run.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from _cli import DEFAULT_TIMEOUT, _env, load_report, validate_against_schema

REPO = Path(__file__).resolve().parents[1]
FAULTS = REPO / "tests" / "programs" / "faults"
PY = sys.executable
NOT_WRITTEN = 6  # ExitCode.NOT_WRITTEN, documented in docs/faults.md
_ADDR = re.compile(rb"0x[0-9a-fA-F]+")
# Python 3.12+ warns at a fork in a multi-threaded process ("This process (pid=N) is multi-threaded"): on a
# GPU machine autograd's device threads make a program that ran backward multi-threaded, under python too
_PID = re.compile(rb"\(pid=\d+\)")


def _same_text(data: bytes) -> bytes:
    return _PID.sub(b"(pid=N)", _ADDR.sub(b"0xADDR", data))


def _terminal_signals():
    """In a child, before exec: SIGHUP, SIGINT and SIGTERM at their default disposition, whatever this pytest
    inherited (`nohup` ignores SIGHUP, a background job of a non-interactive shell ignores SIGINT, and an
    ignored signal stays ignored across exec), so python and tensorscope are compared as a terminal starts them."""
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def _run(cmd, cwd, **kw):
    kw.setdefault("preexec_fn", _terminal_signals)
    p = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, timeout=DEFAULT_TIMEOUT, **kw)
    return p.returncode, _same_text(p.stdout), _same_text(p.stderr)


def pair(prog: str, *args: str, cwd: Path, report: Path, options=(), **kw):
    """(python's (rc, stdout, stderr), tensorscope's) for `run -o REPORT PROG ARGS`, run concurrently."""
    path = str(FAULTS / prog)
    with ThreadPoolExecutor(2) as pool:
        py = pool.submit(_run, [PY, path, *args], cwd, **kw)
        ts = pool.submit(_run, [PY, "-m", "tensorscope", "run", *options, "-o", str(report), path, *args], cwd, **kw)
        return py.result(), ts.result()


def read_report(path: Path) -> dict:
    doc = load_report(path.read_text())
    validate_against_schema(doc)
    return doc


def no_temporary_files(folder: Path) -> list:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


# --- os._exit (rows 1, 2) -------------------------------------------------------------------------

def test_os_exit_from_a_thread_ends_the_process_at_once(tmp_path):
    report = tmp_path / "r.json"
    py, ts = pair("os_exit_in_thread.py", cwd=tmp_path, report=report)
    assert py[0] == 9 and b"still alive" not in py[1], py
    assert ts == py
    doc = read_report(report)
    assert doc["program"]["exit_status"] == 9
    assert any("os._exit(9)" in n for n in doc["notes"]), doc["notes"]
    assert doc["events_summary"]["recorded"] > 0  # what the program did before is there


def test_os_exit_cannot_be_caught(tmp_path):
    report = tmp_path / "r.json"
    py, ts = pair("os_exit_caught.py", cwd=tmp_path, report=report)
    assert py[0] == 4 and b"caught" not in py[1] and b"finally" not in py[1], py
    assert ts == py
    assert read_report(report)["program"]["exit_status"] == 4


def test_os_exit_in_run_without_o_prints_the_report_once(tmp_path):
    """The report goes past sys.stdout's buffer, which os._exit loses under python (pipe: nothing flushed)."""
    path = str(FAULTS / "os_exit_caught.py")
    rc, out, err = _run([PY, "-m", "tensorscope", "run", path], tmp_path)
    assert rc == 4, err
    assert out.count(b"tensorscope run ") == 1 and b"os._exit(4)" in out, out
    assert b"\ncaught\n" not in out and b"\nfinally\n" not in out


# --- the report file (rows 3, 4, 8) and kill -9 -----------------------------------------------------

def _limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))  # the report is larger (python ignores SIGXFSZ)


def test_full_disk_leaves_the_previous_report(tmp_path):
    report = tmp_path / "r.json"
    report.write_text('{"previous": true}\n')
    py, ts = pair("os_exit_caught.py", cwd=tmp_path, report=report, preexec_fn=_limit_file_size)
    assert ts[0] == NOT_WRITTEN, ts
    assert ts[1] == py[1]
    message = ts[2][len(py[2]):].decode()
    assert ts[2].startswith(py[2]) and message.count("\n") == 1, ts[2]
    assert "can't write the report" in message and "previous file is untouched" in message, message
    assert report.read_text() == '{"previous": true}\n'
    assert no_temporary_files(tmp_path) == []


def test_dev_full(tmp_path):
    rc, out, err = _run([PY, "-m", "tensorscope", "run", "-o", "/dev/full", str(FAULTS / "exit_huge.py")], tmp_path)
    assert rc == NOT_WRITTEN, (rc, err)
    assert b"No space left on device" in err and b"Traceback" not in err


def _closed_stdout():
    _terminal_signals()
    os.close(1)


@pytest.mark.parametrize("stdout", ["/dev/full", "a pipe whose reader left", "closed"])
def test_a_report_that_cannot_be_printed(tmp_path, stdout):
    """No -o: the report goes to stdout, which is full, a pipe nobody reads (`| head`) or closed (`>&-`).
    The program runs as under python (which exits 0 here: it prints nothing); then one line says the
    report was not printed, exit NOT_WRITTEN, never an internal error."""
    if stdout == "/dev/full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    results = []
    for cmd in ([PY], [PY, "-m", "tensorscope", "run"]):
        marker = tmp_path / f"ran{len(results)}.txt"
        kw = {"preexec_fn": _closed_stdout} if stdout == "closed" else {}
        r, w = os.pipe()
        os.close(r)
        sink = open(stdout, "wb") if stdout == "/dev/full" else w
        try:
            p = subprocess.run([*cmd, str(FAULTS / "marker.py"), str(marker)], cwd=tmp_path, env=_env(),
                               stdout=None if stdout == "closed" else sink, stderr=subprocess.PIPE,
                               timeout=DEFAULT_TIMEOUT, **kw)
        finally:
            os.close(w)
            if stdout == "/dev/full":
                sink.close()
        results.append((p.returncode, p.stderr, marker.read_text()))
    (py_rc, py_err, py_ran), (rc, err, ran) = results
    assert (py_rc, py_err, py_ran) == (0, b"", "ran")
    assert ran == "ran" and rc == NOT_WRITTEN, (rc, err)
    assert err.count(b"\n") == 1 and err.startswith(b"tensorscope: can't print the report on stdout: "), err


@pytest.mark.parametrize("where", ["missing folder", "a folder", "a folder that makes no file"])
def test_output_is_checked_before_the_program_starts(tmp_path, where):
    """A folder that makes no file: /proc (os.access lets root write there, creating a file fails)."""
    marker = tmp_path / "ran.txt"
    output = {"missing folder": tmp_path / "missing" / "r.json", "a folder": tmp_path,
              "a folder that makes no file": Path("/proc/r.json")}[where]
    if where == "a folder that makes no file" and not os.path.isdir("/proc"):
        pytest.skip("no /proc here")
    rc, out, err = _run([PY, "-m", "tensorscope", "run", "-o", str(output), str(FAULTS / "marker.py"), str(marker)],
                        tmp_path)
    assert rc == 2 and out == b"", (rc, out, err)
    assert err.decode().count("\n") == 1 and b"can't write the report" in err, err
    assert not marker.exists(), "the program ran before -o was checked"


def _nobody(tmp_path):
    """A preexec_fn that becomes the user nobody, if nobody can run this python and tensorscope here; else None."""
    for p in (tmp_path, *tmp_path.parents):
        if os.stat(p).st_mode & 0o005 != 0o005:
            return None

    def preexec():
        os.setgid(65534)
        os.setuid(65534)

    probe = subprocess.run([PY, "-c", "import tensorscope, torch"], cwd=tmp_path, env=_env(),
                           preexec_fn=preexec, capture_output=True, timeout=DEFAULT_TIMEOUT)
    return preexec if probe.returncode == 0 else None


def test_read_only_folder(tmp_path):
    """A folder the user cannot write to: as a non-root user, a folder without write permission; as root,
    whom permissions do not bind, the same as nobody, else (nobody cannot run python here: /root is
    closed) a read-only file system, which binds root too, where this machine lets root mount one."""
    folder = tmp_path / "ro"
    folder.mkdir()
    marker = tmp_path / "ran.txt"
    cmd = [PY, "-m", "tensorscope", "run", "-o", str(folder / "r.json"), str(FAULTS / "marker.py"), str(marker)]
    preexec, mounted = None, False
    if os.geteuid() != 0:
        folder.chmod(0o555)
    else:
        tmp_path.chmod(0o777)
        preexec = _nobody(tmp_path)
        if preexec is None and shutil.which("mount"):
            mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
                                   capture_output=True, timeout=DEFAULT_TIMEOUT)
            mounted = mount.returncode == 0
        if preexec is None and not mounted:
            pytest.skip("as root here, neither nobody can run python nor a read-only file system can be mounted")
    try:
        p = subprocess.run(cmd, cwd=tmp_path, env=_env(), preexec_fn=preexec, capture_output=True,
                           timeout=DEFAULT_TIMEOUT)
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], capture_output=True, timeout=DEFAULT_TIMEOUT)
        folder.chmod(0o755)
    why = b"is on a read-only file system" if mounted else b"is not writable"  # the reason os.access hides
    assert p.returncode == 2 and why in p.stderr, p
    assert p.stdout == b"" and not marker.exists()


def test_relative_output_is_resolved_where_tensorscope_started(tmp_path):
    report = tmp_path / "r.json"
    path = str(FAULTS / "chdir_relative.py")
    with ThreadPoolExecutor(2) as pool:
        py = pool.submit(_run, [PY, path, "py_out"], tmp_path)
        ts = pool.submit(_run, [PY, "-m", "tensorscope", "run", "-o", "r.json", path, "ts_out"], tmp_path)
        py, ts = py.result(), ts.result()
    assert ts[0] == py[0] == 0 and ts[1] == py[1].replace(b"py_out", b"ts_out")
    assert read_report(report)["program"]["exit_status"] == 0
    assert not (tmp_path / "ts_out" / "r.json").exists()


def _wait_for(proc, text: bytes, stream) -> bytes:
    """What ``stream`` gave until ``text`` appeared (read past its buffer: communicate() reads the rest)."""
    seen = b""
    deadline = time.monotonic() + DEFAULT_TIMEOUT
    while text not in seen and time.monotonic() < deadline:
        chunk = os.read(stream.fileno(), 65536)
        if not chunk:
            break
        seen += chunk
    assert text in seen, seen
    return seen


def _signalled(cmd, signum, cwd, ready=b"ready\n", stream="stdout"):
    """(returncode, stdout, stderr) of ``cmd``, sent ``signum`` once ``ready`` appeared on ``stream``."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=_env(), preexec_fn=_terminal_signals, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        first = _wait_for(proc, ready, getattr(proc, stream))
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=DEFAULT_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return (proc.returncode, first + out, err) if stream == "stdout" else (proc.returncode, out, first + err)


def test_kill_9_leaves_the_previous_report(tmp_path):
    report = tmp_path / "r.json"
    report.write_text("previous\n")
    cmd = [PY, "-m", "tensorscope", "run", "-o", str(report), "tests/programs/forever_loop.py"]
    assert _signalled(cmd, signal.SIGKILL, REPO)[0] == -signal.SIGKILL
    assert report.read_text() == "previous\n"


# --- signals (rows 5, 6) ------------------------------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_fatal_signal_writes_the_report_then_dies_by_it(tmp_path, signum):
    report = tmp_path / "r.json"
    report.write_text("previous\n")
    prog = "tests/programs/forever_loop.py"
    with ThreadPoolExecutor(2) as pool:
        py = pool.submit(_signalled, [PY, prog], signum, REPO)
        ts = pool.submit(_signalled, [PY, "-m", "tensorscope", "run", "-o", str(report), prog], signum, REPO)
        py, ts = py.result(), ts.result()
    assert py == (-signum, b"ready\n", b"")
    assert ts == py
    doc = read_report(report)
    assert doc["program"]["exit_status"] == 128 + signum
    assert f"ended by {signal.Signals(signum).name}: the report is partial" in doc["notes"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_fatal_signal_to_the_group_runs_none_of_the_programs_handlers(tmp_path, signum):
    """`timeout`, Slurm and a closed terminal signal the whole group: the workers die too, and their SIGCHLD
    must not reach the program's handler (torch's, for DataLoader workers) while the report is written: under
    python the process is gone (NOTE [Ending as python ends])."""
    report = tmp_path / "r.json"
    report.write_text("previous\n")
    path = str(FAULTS / "children_die_on_term.py")

    def group(cmd):
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=_env(), preexec_fn=_terminal_signals, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            first = _wait_for(proc, b"ready\n", proc.stdout)
            os.killpg(proc.pid, signum)
            out, err = proc.communicate(timeout=DEFAULT_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return proc.returncode, first + out, _same_text(err)

    with ThreadPoolExecutor(2) as pool:
        py = pool.submit(group, [PY, path])
        ts = pool.submit(group, [PY, "-m", "tensorscope", "run", "-o", str(report), path])
        py, ts = py.result(), ts.result()
    # stderr: nothing, or (3.12+, a GPU's autograd threads) python's warnings at the program's forks
    assert py[:2] == (-signum, b"ready\n") and b"Traceback" not in py[2], py
    assert ts == py
    doc = read_report(report)
    assert doc["program"]["exit_status"] == 128 + signum
    assert doc["events_summary"]["recorded"] > 0


def test_sigterm_loses_buffered_output_as_python_does(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # stdout block-buffered in a pipe, as by default
    report = tmp_path / "r.json"
    path = str(FAULTS / "buffered_then_term.py")

    def killed(cmd):
        return _signalled(cmd, signal.SIGTERM, tmp_path, stream="stderr")

    with ThreadPoolExecutor(2) as pool:
        py = pool.submit(killed, [PY, path])
        ts = pool.submit(killed, [PY, "-m", "tensorscope", "run", "-o", str(report), path])
        py, ts = py.result(), ts.result()
    assert py == (-signal.SIGTERM, b"", b"ready\n")
    assert ts == py
    assert read_report(report)["program"]["exit_status"] == 128 + signal.SIGTERM


def test_the_programs_own_sigterm_handler_keeps_working(tmp_path):
    report = tmp_path / "r.json"
    path = str(FAULTS / "sigterm_handler.py")
    with ThreadPoolExecutor(2) as pool:
        py = pool.submit(_signalled, [PY, path], signal.SIGTERM, tmp_path)
        ts = pool.submit(_signalled, [PY, "-m", "tensorscope", "run", "-o", str(report), path], signal.SIGTERM,
                         tmp_path)
        py, ts = py.result(), ts.result()
    dfl = str(signal.SIG_DFL).encode()  # "0" from Python 3.11, "Handlers.SIG_DFL" on 3.10 (IntEnum's str)
    assert py[0] == 3 and py[1] == b"default %s %s\nprevious %s\nready\nhandled SIGTERM\n" % (dfl, dfl, dfl), py
    assert ts == py
    assert read_report(report)["program"]["exit_status"] == 3


def test_second_ctrl_c_while_the_report_is_built(tmp_path):
    """The program ends by KeyboardInterrupt; Ctrl-C again while tensorscope builds a large report: the
    report is still written whole, and the process dies by SIGINT as python's does."""
    report = tmp_path / "r.json"
    path = str(FAULTS / "interrupt_big_report.py")
    py = _run([PY, path], tmp_path)
    assert py[0] == -signal.SIGINT and py[2].endswith(b"KeyboardInterrupt\n"), py
    # Ctrl-C again once the program has ended (its traceback is out): while the report is built
    ts = _signalled([PY, "-m", "tensorscope", "run", "-o", str(report), path], signal.SIGINT, tmp_path,
                    ready=b"\nKeyboardInterrupt\n", stream="stderr")
    assert ts == py, ts
    doc = read_report(report)
    assert doc["program"]["exit_status"] == 130 and doc["tensors"], doc["program"]
    assert any(n.startswith("interrupted") for n in doc["notes"]), doc["notes"]



def test_ctrl_c_while_a_tensor_is_freed_reaches_the_program(tmp_path):
    """SIGINT marked as arrived just as a tensor is freed: under python the program's next line hears it;
    under tensorscope the weak reference callback that forgets the tensor's id ran first, and Python dropped
    the KeyboardInterrupt raised there ("Exception ignored in: <function _forgetter.<locals>.forget>"), and the
    exception of the program's own SIGINT handler too; on 3.12+ the line callback heard it, with a frame of
    tensorscope's. Now python's: the same output, traceback and death by SIGINT, and ``signal.getsignal`` /
    ``signal.signal`` give the program's handlers (NOTE [A signal handler that lands in a callback of
    tensorscope's] in exits.py)."""
    report = tmp_path / "r.json"
    py, ts = pair("ctrl_c_as_a_tensor_dies.py", cwd=tmp_path, report=report)
    assert py[0] == -signal.SIGINT and py[2].endswith(b"KeyboardInterrupt\n"), py
    assert b"KeyboardInterrupt at iteration 0\n" in py[1] and b"stopped by signal 2 in step" in py[1], py
    assert ts == py, ts
    doc = read_report(report)
    assert doc["program"]["exit_status"] == 130
    assert any(n.startswith("interrupted") for n in doc["notes"]), doc["notes"]

# --- exceptions and exit statuses (rows 7, 10) --------------------------------------------------------

@pytest.mark.parametrize("prog,status", [("str_raises.py", 1), ("exit_huge.py", 255)])
def test_exit_as_python(tmp_path, prog, status):
    report = tmp_path / "r.json"
    py, ts = pair(prog, cwd=tmp_path, report=report)
    assert py[0] == status
    assert ts == py
    doc = read_report(report)
    assert doc["program"]["exit_status"] == status
    if prog == "str_raises.py":
        assert doc["program"]["exception"]["message"] == "<exception str() failed>"
    else:  # explain exits with its own status, and prints what the interpreter prints for it (3.13.0 has a text)
        rc, out, err = _run([PY, "-m", "tensorscope", "explain", str(FAULTS / prog)], tmp_path)
        assert rc == 0 and out.startswith(py[1]), (rc, out)
        assert err == py[2], (err, py[2])


# --- children (rows 9, 11) ------------------------------------------------------------------------------

def test_forked_children_never_write_the_parents_report(tmp_path):
    report = tmp_path / "r.json"
    py, ts = pair("fork_child.py", cwd=tmp_path, report=report)
    assert py[0] == 0 and b"late child done" in py[1], py  # the late child outlives the parent
    assert ts == py
    doc = read_report(report)
    children = doc["program"]["children"]
    assert [c["start"] for c in children] == ["fork", "fork"] and children[0]["exit_status"] == 0
    assert not children[0]["failed"]
    # without -o the report is printed once, by the parent
    rc, out, err = _run([PY, "-m", "tensorscope", "run", str(FAULTS / "fork_child.py")], tmp_path)
    assert rc == 0 and out.count(b"tensorscope run ") == 1, out


COUNTING_ENGINE = """
import torch
from torch.autograd import variable

RUNS = []
_engine = variable.Variable._execution_engine


class Counting:  # autograd's engine, counting the graph tasks it is given
    def __getattr__(self, name):
        return getattr(_engine, name)

    def run_backward(self, *args, **kwargs):
        RUNS.append(1)
        return _engine.run_backward(*args, **kwargs)


variable.Variable._execution_engine = Counting()
"""


def test_no_backward_runs_before_the_program(tmp_path):
    """On a GPU machine the engine's first graph task starts its device threads and marks every later fork as
    bad: a hogwild worker forked by a program that ran no backward must not find one run by tensorscope (NOTE
    [No backward before the program]). Counted on any machine through a sitecustomize that wraps the engine."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(COUNTING_ENGINE)
    prog = tmp_path / "first_line.py"
    prog.write_text("import sitecustomize\nprint('graph tasks before the first line:', len(sitecustomize.RUNS))\n")
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path / "site"), env.get("PYTHONPATH")) if p)
    for cmd in ([PY, str(prog)], [PY, "-m", "tensorscope", "run", str(prog)],
                [PY, "-m", "tensorscope", "explain", str(prog)]):
        p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, timeout=DEFAULT_TIMEOUT)
        assert p.returncode == 0 and b"graph tasks before the first line: 0\n" in p.stdout, (cmd, p.stdout, p.stderr)


def test_a_fork_while_threaded_warns_as_under_python(tmp_path):
    """Python 3.12+'s fork warning at the program's line, once per line, the program's own warnings unchanged
    (NOTE [The fork warning at the program's line]); before 3.12 the same output with no warning."""
    report = tmp_path / "r.json"
    py, ts = pair("fork_while_threaded.py", cwd=tmp_path, report=report)
    assert py[0] == 0 and py[1] == b"forked 4 children [2.0, 2.0]\n", py
    if sys.version_info >= (3, 12):
        assert py[2].count(b"is multi-threaded, use of fork()") == 2, py[2]  # two fork lines, each once
    assert ts == py
    assert len(read_report(report)["program"]["children"]) == 4


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_hogwild_workers_that_raise_are_never_clean(tmp_path, method):
    path = str(FAULTS / "hogwild.py")
    with ThreadPoolExecutor(2) as pool:
        py = pool.submit(_run, [PY, path, method], tmp_path)
        ts = pool.submit(_run, [PY, "-m", "tensorscope", "explain", path, method], tmp_path)
        py, ts = py.result(), ts.result()
    assert py[0] == 0 and py[1] == b"exit codes [1, 1]\n", py
    for worker in (b"worker 0 failed", b"worker 1 failed"):
        assert worker in py[2] and worker in ts[2], ts[2]
    assert ts[0] == 1, ts  # explain: something failed
    assert b"clean" not in ts[1] and b"2 child processes failed" in ts[1], ts[1]


def test_subprocess_and_dataloader_workers_are_named(tmp_path):
    report = tmp_path / "r.json"
    py, ts = pair("children_exec.py", cwd=tmp_path, report=report)
    assert py[0] == 0 and b"subprocess 3 child says hi" in py[1], py
    assert ts == py
    doc = read_report(report)
    children = doc["program"]["children"]
    assert children[0]["start"] == "exec" and children[0]["argv"][1] == "-c"
    assert children[0]["exit_status"] == 3 and children[0]["failed"]
    # started by os.posix_spawn (close_fds=False; on Python 3.13 the first one too: NOTE [Child processes])
    assert children[1]["start"] == "exec" and children[1]["argv"][2] == "print('spawned')", children
    assert children[1]["exit_status"] == 0 and not children[1]["failed"]
    workers = children[2:]
    assert len(workers) == 2 and all(c["start"] == "fork" and c["exit_status"] == 0 for c in workers), children
    assert any("4 child processes ran outside the recording" in n for n in doc["notes"]), doc["notes"]
    # the saved report explained again, as a page: a failed child is never "clean" there either
    rc, out, err = _run([PY, "-m", "tensorscope", "explain", "-o", "r.html", str(report)], tmp_path)
    assert rc == 1, err
    page = (tmp_path / "r.html").read_text()
    assert "1 child process failed" in page and "is clean" not in page



def test_children_the_program_stops_itself_are_not_failures(tmp_path):
    """Pool.terminate (a Pool's `with` block), Process.terminate and Popen.kill end children by a signal the
    program sends: python's run succeeds, so the verdict names only the child that failed on its own."""
    report = tmp_path / "r.json"
    py, ts = pair("children_stopped.py", cwd=tmp_path, report=report)
    assert py[0] == 0 and py[1].endswith(b"terminated -15\nkilled -9\nfailing 3\n"), py
    assert ts == py
    children = read_report(report)["program"]["children"]
    failed = [c for c in children if c["failed"]]
    assert [c["exit_status"] for c in failed] == [3], children
    stopped = [c for c in children if c["exit_status"] in (-signal.SIGTERM, -signal.SIGKILL)]
    assert len(stopped) >= 2 and not any(c["failed"] for c in stopped), children
    rc, out, err = _run([PY, "-m", "tensorscope", "explain", str(report)], tmp_path)
    assert rc == 1 and b"1 child process failed" in out, (rc, out, err)


def test_the_exit_code_table_lists_every_exit_code():
    from tensorscope.exitcodes import ExitCode

    text = (REPO / "docs" / "faults.md").read_text()
    table = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert documented == {int(code) for code in ExitCode}


def test_a_read_only_report_file(tmp_path):
    """`-o FILE` where FILE is mode 0444. A user whom the mode binds: exit 2 before the program runs, FILE as it
    was. Root, whom it does not bind (open(FILE, "w") writes it, as pyinstrument's -o does): the program runs
    as under python, FILE is replaced by the report and keeps its mode (docs/faults.md)."""
    marker = tmp_path / "ran.txt"
    prog = str(FAULTS / "marker.py")
    report = tmp_path / "r.json"
    report.write_text("old")
    report.chmod(0o444)
    try:
        ts = subprocess.run([PY, "-m", "tensorscope", "run", "-o", str(report), prog, str(marker)], cwd=tmp_path,
                            env=_env(), capture_output=True, timeout=DEFAULT_TIMEOUT)
        mode = report.stat().st_mode & 0o777
        text = report.read_text()
    finally:
        report.chmod(0o644)
    if os.geteuid() != 0:
        assert ts.returncode == 2 and b"permission denied" in ts.stderr, ts
        assert text == "old" and not marker.exists()
        return
    marker.unlink()
    py = subprocess.run([PY, prog, str(marker)], cwd=tmp_path, env=_env(), capture_output=True, timeout=DEFAULT_TIMEOUT)
    assert (ts.returncode, ts.stdout, ts.stderr) == (py.returncode, py.stdout, py.stderr) == (0, b"", b""), ts
    assert marker.read_text() == "ran"
    assert mode == 0o444
    assert load_report(text)["program"]["exit_status"] == 0


_NOBODY = 65534


def _python_for_nobody(work: Path):
    """(argv0 of a python the user nobody can run, the environment, a preexec_fn that becomes nobody), or a str
    saying why there is none. This python where nobody can reach it; else (a venv whose interpreter lives under
    /root, 0700) its interpreter and standard library hard-linked into ``work`` (no data copied), the tree and
    the venv's site-packages on PYTHONPATH: what `python -m tensorscope` needs before a program starts."""
    import site
    import sysconfig

    def preexec():
        _terminal_signals()
        os.setgid(_NOBODY)
        os.setuid(_NOBODY)

    env = _env()
    paths = [str(REPO), *site.getsitepackages()]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env["PYTHONPATH"]] if env.get("PYTHONPATH") else paths)
    env.pop("PYTHONHOME", None)

    def works(python) -> bool:
        try:
            probe = subprocess.run([python, "-c", "import tensorscope.cli"], cwd=work, env=env, preexec_fn=preexec,
                                   capture_output=True, timeout=DEFAULT_TIMEOUT)
        except OSError:  # nobody cannot even start it (a folder on its path is closed)
            return False
        return probe.returncode == 0

    if works(PY):
        return PY, env, preexec
    real = os.path.realpath(PY)
    stdlib = sysconfig.get_paths()["stdlib"]
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if os.path.basename(stdlib) != version or not os.path.isfile(os.path.join(stdlib, "os.py")):
        return f"nobody cannot run {PY} and its standard library ({stdlib}) is not laid out as lib/{version}"
    home = work / "py"
    try:
        (home / "bin").mkdir(parents=True)
        os.link(real, home / "bin" / version)
        libdir = os.path.join(os.path.dirname(os.path.dirname(real)), "lib")
        for name in os.listdir(libdir):  # a shared libpython, where the interpreter links one
            if name.startswith("libpython") and os.path.isfile(os.path.join(libdir, name)):
                (home / "lib").mkdir(exist_ok=True)
                os.link(os.path.join(libdir, name), home / "lib" / name)
        skip = {"site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip"}
        for folder, dirs, files in os.walk(stdlib):
            dirs[:] = [d for d in dirs if d not in skip]
            target = home / "lib" / version / os.path.relpath(folder, stdlib)
            target.mkdir(parents=True, exist_ok=True)
            for name in files:
                os.link(os.path.join(folder, name), target / name)
    except OSError as e:  # another file system (EXDEV), hard links refused
        return f"nobody cannot run {PY}, and its interpreter cannot be hard-linked where nobody can: {e}"
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(home / "lib"), env.get("LD_LIBRARY_PATH")]))
    python = str(home / "bin" / version)
    if not works(python):
        return f"nobody can run neither {PY} nor its hard-linked copy (the tree or site-packages unreadable?)"
    return python, env, preexec


def test_output_not_writable_for_a_user_who_is_not_root(tmp_path):
    """`-o` into a folder the user cannot write to (a new file, and a file of root's there), and onto a 0444 file,
    run by a user who is not root (as root here: the user nobody): exit 2 before the program runs, the reason on
    stderr, the old files untouched.
    Root is not bound by permissions (test_a_read_only_report_file); this is what every other user gets."""
    if os.geteuid() != 0:
        python, env, preexec = PY, _env(), _terminal_signals
        work = tmp_path
    else:
        import tempfile

        work = Path(tempfile.mkdtemp(prefix="ts-nobody-", dir="/tmp"))  # pytest's tmp_path: 0700, root's
        work.chmod(0o755)
    try:
        if os.geteuid() == 0:
            found = _python_for_nobody(work)
            if isinstance(found, str):
                pytest.skip(found)
            python, env, preexec = found
        shutil.copy(FAULTS / "marker.py", work / "marker.py")
        free = work / "free"  # the user may write here: the program's marker, and the 0444 report
        free.mkdir()
        free.chmod(0o777)
        closed = work / "closed"  # the user's folder without write permission (root's, 0755, as nobody)
        closed.mkdir()
        if os.geteuid() != 0:
            closed.chmod(0o555)
        old = {closed / "r.json": b"old report\n", free / "r.json": b"old report\n"}
        for path, data in old.items():
            path.write_bytes(data)
        (free / "r.json").chmod(0o444)
        before = {path: path.stat() for path in old}
        for report, why in ((closed / "new.json", b"is not writable"), (closed / "r.json", b"permission denied"),
                            (free / "r.json", b"permission denied")):
            marker = free / "ran.txt"
            p = subprocess.run([python, "-m", "tensorscope", "run", "-o", str(report), str(work / "marker.py"),
                                str(marker)], cwd=free, env=env, preexec_fn=preexec, capture_output=True,
                               timeout=DEFAULT_TIMEOUT)
            assert p.returncode == 2 and p.stdout == b"" and why in p.stderr, (report, p)
            assert p.stderr.count(b"\n") == 1 and b"can't write the report" in p.stderr, p.stderr
            assert not marker.exists(), "the program ran before -o was checked"
        for path, data in old.items():
            now = path.stat()
            assert path.read_bytes() == data and (now.st_mtime_ns, now.st_ino) == (before[path].st_mtime_ns,
                                                                                     before[path].st_ino), path
        assert sorted(p.name for p in free.iterdir()) == ["r.json"] and os.listdir(closed) == ["r.json"]
    finally:
        for folder in (work / "closed", work):
            if folder.exists():
                folder.chmod(0o755)
        if work != tmp_path:
            shutil.rmtree(work, ignore_errors=True)



@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P (sys.flags.safe_path) is Python 3.11+")
def test_python_dash_p_keeps_the_scripts_folder_off_sys_path(tmp_path):
    """`python -P prog.py` puts nothing in front of sys.path: a sibling module of the script cannot be imported,
    and sys.path[0] is the first PYTHONPATH entry. `python -P -m tensorscope run prog.py` replaced that entry by
    the script's folder (the sibling imported, the entry lost). NOTE [python -P] in runner.py."""
    folder = tmp_path / "prog"
    folder.mkdir()
    (folder / "sibling_of_the_script.py").write_text("X = 1\n")
    prog = folder / "prog.py"
    prog.write_text("import sys\nprint(sys.flags.safe_path, sys.path[0])\nimport sibling_of_the_script\n")
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(tmp_path)])  # a first entry that is not the tree
    results = []
    for cmd in ([PY, "-P", str(prog)], [PY, "-P", "-m", "tensorscope", "run", "-o", str(tmp_path / "r.json"),
                                        str(prog)]):
        p = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=DEFAULT_TIMEOUT)
        results.append((p.returncode, p.stdout, p.stderr.splitlines()[-1:]))
    assert results[0] == (1, f"True {REPO}\n", ["ModuleNotFoundError: No module named 'sibling_of_the_script'"]), \
        results[0]
    assert results[1] == results[0], results[1]
    assert load_report((tmp_path / "r.json").read_text())["program"]["exit_status"] == 1
