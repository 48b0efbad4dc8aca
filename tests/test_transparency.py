"""Transparency: under `tensorscope run -o FILE` a program behaves exactly as under `python prog.py`.

Each program in tests/programs/ is run twice, concurrently, from the repository root with the same
argv, stdin bytes and environment:

    python tests/programs/P.py ARGS
    python -m tensorscope run -o <tmp>/r.json tests/programs/P.py -- ARGS

and the return code, stdout bytes and stderr bytes must be identical. The programs print the facts
that would differ if tensorscope disturbed them (gradients, versions, weakref deaths, hook counts...).

Python's run is always a fresh interpreter: it is the reference. Tensorscope's run of a program whose
behaviour does not depend on how the process starts or ends is a fork of one process that imported
torch and tensorscope once (tests/_forked.py, about 2 s of CPU saved per program); the programs in
FRESH test exactly that (exit statuses and messages, uncaught exceptions, Ctrl-C, `os._exit`, threads
and finalizers at interpreter exit, the depth of the stack) and run `python -m tensorscope` of their own.
"""

from __future__ import annotations

import json
import os
import re
import resource
import selectors
import signal
import subprocess
import sys
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from _cli import _env, run_many

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = REPO / "tests" / "programs"
PY = sys.executable
TIMEOUT = 900  # seconds per subprocess: guards a hang, not speed (there is no pytest-timeout here)

# (program, argv, stdin bytes)
CASES = [
    ("threads_dataloader.py", [], b""),
    ("thread_pool_left_open.py", [], b""),
    ("func_transforms.py", [], b""),
    ("checkpoint_prog.py", [], b""),
    ("custom_function.py", [], b""),
    ("autograd_misc.py", [], b""),
    ("saved_hooks_user.py", [], b""),
    ("anomaly_ok.py", [], b""),
    ("nan_training.py", [], b""),
    ("anomaly_error.py", [], b""),
    ("grad_modes.py", [], b""),
    ("compile_eager.py", [], b""),
    ("torch_function_funcs.py", [], b""),
    pytest.param(
        "compile_inductor.py", [], b"",
        marks=[
            pytest.mark.slow,
            pytest.mark.skipif(not os.environ.get("TENSORSCOPE_SLOW"), reason="inductor compile is slow; set TENSORSCOPE_SLOW=1"),
        ],
    ),
    ("dtypes_layouts.py", [], b""),
    ("pkg_main.py", ["a", "b c", "--flag"], b"Alice\nrest of stdin\n"),
    ("big_output.py", [], b""),
    ("deep_recursion.py", [], b""),
    ("recursion_limit.py", [], b""),
    ("introspection.py", [], b""),
    ("exit_3.py", [], b""),
    ("exit_message.py", [], b""),
    ("os_exit_5.py", [], b""),
    ("keyboard_interrupt.py", [], b""),
    ("custom_exception.py", [], b""),
    ("caught_tracebacks.py", [], b""),
    ("user_warning.py", [], b""),
    ("warnings_per_line.py", [], b""),
    ("hostile_names.py", [], b""),
    ("proxies_in_globals.py", [], b""),
    ("heap_census.py", [], b""),
    ("gc_state.py", [], b""),
    ("gc_state.py", ["off"], b""),
]

# Programs about the start or the end of the process (exit paths, signals, threads and finalizers at
# interpreter exit, stack depth): tensorscope runs them in a fresh `python -m tensorscope`, as a user does.
# A fork of tests/_forked.py leaves through its own exit path (os._exit after atexit handlers, no
# interpreter finalization: gc_state.py's finalizer line is missing there), so it cannot stand for these.
FRESH = {"exit_3.py", "exit_message.py", "os_exit_5.py", "keyboard_interrupt.py", "custom_exception.py",
         "gc_state.py", "recursion_limit.py", "deep_recursion.py", "thread_pool_left_open.py",
         "compile_inductor.py"}

# The ONLY normalisation: default object reprs (`<function f at 0x7f...>`, `<... object at 0x...>`)
# embed addresses that change between any two runs of plain python (ASLR), so they are masked in both
# outputs. Nothing else is normalised: no timings are printed by these programs, paths are the same
# because both runs share cwd and argv, and warnings/tracebacks must match byte for byte.
_ADDR = re.compile(rb"0x[0-9a-fA-F]+")


def normalise(data: bytes) -> bytes:
    return _ADDR.sub(b"0xADDR", data)


def base_env(**extra: str) -> dict:
    """The environment of both runs: the tests' own (tests/_cli.py: no PYTHONWARNINGS, PYTHONHASHSEED=0),
    which the forked runs of tests/_forked.py have too."""
    env = _env()
    env.update(extra)
    return env


def _run(cmd, stdin: bytes, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, input=stdin, capture_output=True, cwd=cwd, env=env, timeout=TIMEOUT)


def _case_values(case):
    return case.values if hasattr(case, "values") else case


def _run_args(prog: str, args: list, report: Path) -> list:
    return ["run", "-o", str(report), f"tests/programs/{prog}", *(["--", *args] if args else [])]


@pytest.fixture(scope="module")
def forked(request, tmp_path_factory):
    """Tensorscope's runs of the selected CASES outside FRESH, as forks of one process started in the
    background, and python's references beside them, one at a time: {(prog, args): a callable that waits
    for them and gives (python's CompletedProcess, tensorscope's, the report's path)}."""
    selected = {tuple(item.callspec.params[k] if k != "args" else tuple(item.callspec.params[k])
                      for k in ("prog", "args"))
                for item in request.session.items
                if item.path.name == Path(__file__).name and item.originalname == "test_program_is_transparent"}
    cases = [(prog, args, stdin) for prog, args, stdin in map(_case_values, CASES)
             if prog not in FRESH and (prog, tuple(args)) in selected]
    folder = tmp_path_factory.mktemp("forked")
    reports = [folder / f"{i}.json" for i in range(len(cases))]
    jobs = [("tensorscope", *_run_args(prog, args, report), {"stdin": stdin})
            for (prog, args, stdin), report in zip(cases, reports)]
    pool, python = ThreadPoolExecutor(1), ThreadPoolExecutor(1)
    runs = pool.submit(run_many, jobs, text=False) if jobs else None
    # python's references meanwhile, one after another: two processes at a time, as in run_pair
    references = [python.submit(run_plain, [PY, f"tests/programs/{prog}", *args], stdin) for prog, args, stdin in cases]

    def result(i):
        rc, out, err, _ = runs.result()[i]
        return references[i].result(), subprocess.CompletedProcess(jobs[i][1:-1], rc, out, err), reports[i]

    yield {(prog, tuple(args)): (lambda i=i: result(i)) for i, (prog, args, _) in enumerate(cases)}
    pool.shutdown(wait=True)
    python.shutdown(wait=True)


# Plain python's result per (argv, program bytes, stdin, cwd, environment): test_json_mode compares
# with the same plain runs as test_program_is_transparent (one torch start-up each saved). The
# programs are deterministic (the tests compare two separate processes byte for byte anyway).
_PLAIN: dict = {}


def _plain_key(cmd, stdin: bytes, cwd: Path, env: dict):
    prog = Path(cwd, cmd[1])
    return (tuple(cmd), prog.read_bytes() if prog.is_file() else None, stdin, str(cwd), tuple(sorted(env.items())))


def run_plain(py_cmd, stdin: bytes, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    """Plain python's run, once per key (see _PLAIN)."""
    env = env or base_env()
    key = _plain_key(py_cmd, stdin, cwd, env)
    if key not in _PLAIN:
        _PLAIN[key] = _run(py_cmd, stdin, cwd, env)
    return _PLAIN[key]


def run_pair(py_cmd, ts_cmd, stdin: bytes, cwd: Path = REPO, env: dict | None = None):
    """Run plain python and tensorscope concurrently (2 cores: halves the wall time)."""
    env = env or base_env()
    key = _plain_key(py_cmd, stdin, cwd, env)
    with ThreadPoolExecutor(2) as pool:
        f_py = None if key in _PLAIN else pool.submit(_run, py_cmd, stdin, cwd, env)
        f_ts = pool.submit(_run, ts_cmd, stdin, cwd, env)
        if f_py is not None:
            _PLAIN[key] = f_py.result()
        return _PLAIN[key], f_ts.result()


def short_diff(name: str, a: bytes, b: bytes, context: int = 3, max_lines: int = 40) -> str:
    """A compact diff: the first differing line with some context, plus sizes."""
    la, lb = a.splitlines(keepends=True), b.splitlines(keepends=True)
    i = 0
    while i < min(len(la), len(lb)) and la[i] == lb[i]:
        i += 1
    lo = max(0, i - context)
    out = [f"{name}: python {len(a)} bytes/{len(la)} lines, tensorscope {len(b)} bytes/{len(lb)} lines; first difference at line {i + 1}"]
    import difflib

    tail_a = [x.decode("utf-8", "replace") for x in la[lo : i + max_lines]]
    tail_b = [x.decode("utf-8", "replace") for x in lb[lo : i + max_lines]]
    diff = list(difflib.unified_diff(tail_a, tail_b, "python", "tensorscope", n=context, lineterm=""))
    out.extend(d.rstrip("\n") for d in diff[: max_lines])
    return "\n".join(out)


def expected_exit_status(returncode: int) -> int:
    # a program that dies of KeyboardInterrupt re-raises SIGINT like python: the report says 130
    return 130 if returncode == -signal.SIGINT else returncode


def check_report(path: Path, returncode: int, problems: list) -> dict | None:
    if not path.exists():
        problems.append(f"report {path.name} was not written")
        return None
    try:
        doc = json.loads(path.read_text())
    except ValueError as err:
        problems.append(f"report is not valid JSON: {err}")
        return None
    status = doc.get("program", {}).get("exit_status")
    if status != expected_exit_status(returncode):
        problems.append(f"report program.exit_status={status!r}, expected {expected_exit_status(returncode)}")
    if doc.get("schema_version") != 4 or doc.get("command") != "run":
        problems.append(f"report schema_version/command: {doc.get('schema_version')!r}/{doc.get('command')!r}")
    return doc


def compare(py: subprocess.CompletedProcess, ts: subprocess.CompletedProcess, problems: list) -> None:
    if py.returncode != ts.returncode:
        problems.append(f"returncode: python {py.returncode}, tensorscope {ts.returncode}")
    if normalise(py.stdout) != normalise(ts.stdout):
        problems.append(short_diff("stdout", normalise(py.stdout), normalise(ts.stdout)))
    if normalise(py.stderr) != normalise(ts.stderr):
        problems.append(short_diff("stderr", normalise(py.stderr), normalise(ts.stderr)))


@pytest.mark.parametrize("prog,args,stdin", CASES)
def test_program_is_transparent(prog, args, stdin, tmp_path, forked):
    rel = f"tests/programs/{prog}"
    report = tmp_path / "r.json"
    py_cmd = [PY, rel, *args]
    if prog in FRESH:
        py, ts = run_pair(py_cmd, [PY, "-m", "tensorscope", *_run_args(prog, args, report)], stdin)
    else:
        py, ts, report = forked[(prog, tuple(args))]()
    problems: list = []
    compare(py, ts, problems)
    check_report(report, py.returncode, problems)
    assert not problems, f"{prog}:\n" + "\n".join(problems)


def test_relative_output_path_and_chdir(tmp_path):
    """cwd elsewhere, absolute program path, relative -o: the program chdir()s, the report still lands in
    the cwd tensorscope was started from."""
    prog = str(PROGRAMS / "pkg_main.py")
    env = base_env(PYTHONPATH=str(REPO))
    py, ts = run_pair(
        [PY, prog, "x"],
        [PY, "-m", "tensorscope", "run", "-o", "r.json", prog, "--", "x"],
        b"Bob\n",
        cwd=tmp_path,
        env=env,
    )
    problems: list = []
    compare(py, ts, problems)
    check_report(tmp_path / "r.json", py.returncode, problems)
    stray = PROGRAMS / "r.json"
    if stray.exists():
        problems.append(f"report written relative to the program's new cwd: {stray}")
        stray.unlink()
    assert not problems, "\n".join(problems)


JSON_CASES = [
    # (program, `--` between tensorscope's options and the program?); options after the program are
    # the program's own (see tests/test_launch.py)
    ("grad_modes.py", True),
    ("exit_3.py", False),
    ("custom_exception.py", False),
]


@pytest.mark.parametrize("prog,options_after", JSON_CASES)
def test_json_mode(prog, options_after):
    rel = f"tests/programs/{prog}"
    ts_cmd = [PY, "-m", "tensorscope", "run", "--json", *(["--"] if options_after else []), rel]
    py, ts = run_pair([PY, rel], ts_cmd, b"")
    problems = []
    if py.returncode != ts.returncode:
        problems.append(f"returncode: python {py.returncode}, tensorscope --json {ts.returncode}")
    text = ts.stdout.decode("utf-8", "replace")
    try:
        doc = json.loads(text)  # json.loads rejects anything after the one document
    except ValueError as err:
        problems.append(f"stdout is not exactly one JSON document: {err}; stdout starts {text[:200]!r}")
        doc = None
    if doc is not None:
        status = doc.get("program", {}).get("exit_status")
        if status != expected_exit_status(py.returncode):
            problems.append(f"program.exit_status={status!r}, python returned {py.returncode}")
    for stream in ("stdout", "stderr"):
        want = normalise(getattr(py, stream))
        if want and want not in normalise(ts.stderr):
            problems.append(f"the program's {stream} is not on tensorscope's stderr:\n" + short_diff("stderr", want, normalise(ts.stderr)))
    assert not problems, f"{prog} --json:\n" + "\n".join(problems)


# ---- Ctrl-C and --timeout ----------------------------------------------------------------------


def _wait_for_ready(proc: subprocess.Popen, deadline: float) -> bytes:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf = b""
    try:
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(timeout=left):
                break
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
    finally:
        sel.close()
    return buf


def _interrupt(cmd, how: str):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=base_env(), start_new_session=True)
    try:
        first = _wait_for_ready(proc, time.monotonic() + TIMEOUT)
        assert first.startswith(b"ready\n"), f"{cmd}: no 'ready' line, got {first!r}"
        time.sleep(0.5)  # let it run the loop a bit
        if how == "group":  # what a terminal's Ctrl-C does: the whole foreground process group
            os.killpg(proc.pid, signal.SIGINT)
        else:  # `kill -INT pid`
            os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, first + out, err


@pytest.fixture
def sigint_not_ignored():
    # If this pytest was started with SIGINT ignored (a background job), children would inherit that.
    old = signal.getsignal(signal.SIGINT)
    if old == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.mark.parametrize("how", ["group", "pid"])
def test_ctrl_c(how, tmp_path, sigint_not_ignored):
    rel = "tests/programs/forever_loop.py"
    report = tmp_path / "r.json"
    py_rc, py_out, py_err = _interrupt([PY, rel], how)
    ts_rc, ts_out, ts_err = _interrupt([PY, "-m", "tensorscope", "run", "-o", str(report), rel], how)
    assert py_rc == -signal.SIGINT and py_err.rstrip().endswith(b"KeyboardInterrupt"), (py_rc, py_err[-300:])
    problems = []
    if ts_rc != py_rc:
        problems.append(f"returncode: python {py_rc}, tensorscope {ts_rc}")
    if not ts_err.rstrip().endswith(b"KeyboardInterrupt"):
        problems.append(f"stderr does not end with KeyboardInterrupt: {ts_err[-400:]!r}")
    if not ts_err.startswith(b"Traceback (most recent call last):\n"):
        problems.append(f"stderr does not start like python's traceback: {ts_err[:300]!r}")
    if str(REPO / "tensorscope").encode() in ts_err:
        problems.append(f"tensorscope's own frames in the traceback:\n{ts_err.decode(errors='replace')}")
    if ts_out != py_out:
        problems.append(f"stdout: python {py_out[:100]!r}, tensorscope {ts_out[:100]!r}")
    check_report(report, py_rc, problems)
    assert not problems, f"Ctrl-C ({how}):\n" + "\n".join(problems)


def test_timeout(tmp_path):
    rel = "tests/programs/forever_loop.py"
    report = tmp_path / "r.json"
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    ts = subprocess.run(
        [PY, "-m", "tensorscope", "run", "--timeout", "2", "-o", str(report), rel],
        capture_output=True, cwd=REPO, env=base_env(), timeout=TIMEOUT,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU, not wall time (the loop spins): the check holds on a loaded machine
    elapsed = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
    problems = []
    if ts.returncode != 124:
        problems.append(f"returncode {ts.returncode}, expected 124")
    lines = [l for l in ts.stderr.decode("utf-8", "replace").splitlines() if l.strip()]
    if len(lines) != 1 or "Traceback" in ts.stderr.decode("utf-8", "replace"):
        problems.append(f"stderr is not a one-line message: {ts.stderr[-600:]!r}")
    if ts.stdout != b"ready\n":
        problems.append(f"stdout {ts.stdout[:200]!r}, expected b'ready\\n'")
    if elapsed > 30:
        problems.append(f"took {elapsed:.1f} s of CPU for --timeout 2")
    if not report.exists():
        problems.append("no partial report written")
    else:
        try:
            json.loads(report.read_text())
        except ValueError as err:
            problems.append(f"partial report is not valid JSON: {err}")
    assert not problems, "--timeout 2:\n" + "\n".join(problems)


def test_every_replaced_attribute_introspects_as_under_python(tmp_path):
    """tests/programs/introspect_wrappers.py probes every attribute of Patcher.plan(): byte-identical output."""
    from tensorscope.instrument.patches import Patcher

    rel = "tests/programs/introspect_wrappers.py"
    report = tmp_path / "r.json"
    py, ts = run_pair([PY, rel], [PY, "-m", "tensorscope", "run", "-o", str(report), rel], b"")
    problems: list = []
    compare(py, ts, problems)
    check_report(report, py.returncode, problems)
    assert not problems, "\n".join(problems)
    out = py.stdout.decode()
    planned = Patcher().plan()  # a dry run: replaces nothing in this process
    assert f"attributes tensorscope replaces: {len(planned)}\n" in out
    assert len(planned) > 300
    for owner, name in planned:
        label = f"{getattr(owner, '__qualname__', None) or owner.__name__}.{name}"
        assert f"\n{label} repr: " in out and f"\n{label} help: " in out, label
    # issue 10, item 7: what python raises, not "property of 'Tensor' object has no deleter"
    assert ("Tensor.data del instance.data: raises RuntimeError: Deleting tensor data is not allowed. "
            "Delete tensor instead!\n") in out


def _trace_event_keeps_locals() -> bool:
    """Whether one trace event leaves a copy of a running function's locals that outlives a ``del`` once
    tracing stops: Python 3.10's trace trampoline copies the fast locals into the frame's ``f_locals``
    dict at every event; 3.11 and later copy only into a dict already made (measured here, not read
    from the version)."""
    class Obj:
        pass

    def local(frame, event, arg):
        return local

    def traced():
        obj = Obj()
        ref = weakref.ref(obj)
        old = sys.gettrace()
        sys._getframe().f_trace = local
        sys.settrace(local)
        sys.settrace(old)  # the line event of this line ran the trampoline
        del obj
        return ref() is not None

    return traced()


def test_a_running_function_keeps_no_local_alive(tmp_path):
    """NOTE [Locals of a running frame]: tensorscope reads the names of a running function (a parameter shared
    between modules, the origin of a NaN loss, a growth sample) and the function's dropped tensors are still
    freed at once, as under python (a weakref to each is dead right after `del`; before Python 3.13 a plain
    `f_locals` read kept them until the function returned)."""
    prog = REPO / "tests" / "programs" / "locals_not_kept.py"
    (rc, want, err), run, explain = run_many([
        ("python", prog), ("tensorscope", "run", "-o", str(tmp_path / "r.json"), str(prog)),
        ("tensorscope", "explain", "-o", str(tmp_path / "e.json"), str(prog))])
    assert rc == 0 and want.count("True") == 5, err[-2000:]
    if _trace_event_keeps_locals():
        # Python 3.10: explain watches BatchNorm's saved statistics line by line with a trace function, and
        # the last event's copy of norm()'s locals keeps `big` until it returns (docs/compatibility.md)
        explain = (explain[0], explain[1].replace("norm False", "norm True"), explain[2])
    assert run[1] == want and explain[1] == want, (run[1], explain[1])
    # explain did read the function's frame for the NaN's origin: the line that computed `scale`
    doc = json.loads((tmp_path / "e.json").read_text())
    assert [h["culprit"]["line"] for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"] == [23]


def test_explain_redoing_an_op_does_not_warn_the_program_again():
    """review19: explain redoes ``std`` from its saved input to find the first non-finite op; torch's warning of
    that redo ("degrees of freedom is <= 0") reached the program's stderr a second time, at its backward line.
    stderr is python's, and the op is still named at its line."""
    prog = Path(__file__).parent / "programs" / "std_of_one_row.py"
    (py_rc, py_out, py_err), (rc, out, err, _) = run_many([("python", prog), ("tensorscope", "explain", prog)])
    assert py_rc == 0 and py_err.count("degrees of freedom") == 1, py_err
    assert err == py_err, err
    assert out.startswith(py_out) and "aten.std" in out and "std_of_one_row.py:11" in out, out
