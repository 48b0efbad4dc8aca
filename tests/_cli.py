"""Helpers for tests that drive the real `tensorscope` CLI in a subprocess.

Everything here talks to tensorscope only through its command line and its JSON
document (docs/CONTRACT.md); expected values are computed by the tests with torch.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SNIPPETS_DIR = REPO / "snippets"
SCHEMA_PATH = REPO / "tensorscope" / "schema" / "report.schema.json"
# seconds per subprocess: it guards a hang, not speed (a niced run on a loaded 2-core machine takes
# minutes); TENSORSCOPE_TEST_TIMEOUT changes it
DEFAULT_TIMEOUT = float(os.environ.get("TENSORSCOPE_TEST_TIMEOUT", 900))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # The program must see the same environment under python and under tensorscope.
    env.pop("PYTHONWARNINGS", None)
    env["PYTHONHASHSEED"] = "0"
    return env


def run_python(path: str | os.PathLike, *args: str, cwd: str | os.PathLike = REPO,
               timeout: float = DEFAULT_TIMEOUT, fresh: bool = True) -> tuple[int, str, str]:
    """`python PATH ARGS...` -> (returncode, stdout, stderr).

    A fresh interpreter by default: the reference for how a program starts and ends. ``fresh=False`` forks
    the run from this test process's fork server instead (NOTE [One fork server per test process]), as
    run_cli's runs are: for a reference whose subject is what the program prints, raises and computes
    while it runs (no interpreter finalization, torch imported before the program starts)."""
    env = _env()
    if fresh or not _FORK_SERVER.can_run(env):
        proc = subprocess.run([sys.executable, str(path), *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr
    return _FORK_SERVER.run("python", [str(path), *map(str, args)], cwd, None, env, timeout)


def run_cli(*args: str, cwd: str | os.PathLike = REPO, stdin: str | None = None,
            timeout: float = DEFAULT_TIMEOUT, fresh: bool = False) -> tuple[int, str, str, Any]:
    """`python -m tensorscope ARGS...` -> (returncode, stdout, stderr, parsed_json).

    parsed_json is the JSON document on stdout when `--json` was passed (None when
    stdout is not valid JSON, so the caller's assertion shows the raw text), else None.

    The run is a fork of this test process's fork server (see NOTE [One fork server per test process]);
    ``fresh=True`` starts a `python -m tensorscope` of its own, for tests whose subject is how the process
    starts or ends (exit paths, signals, what a fresh interpreter has imported).
    """
    env = _env()
    if fresh or not _FORK_SERVER.can_run(env):
        proc = subprocess.run([sys.executable, "-m", "tensorscope", *args], cwd=cwd, env=env,
                              input=stdin, capture_output=True, text=True, timeout=timeout)
        return _result("tensorscope", [str(a) for a in args], proc.returncode, proc.stdout.encode(),
                       proc.stderr.encode(), True)
    return _FORK_SERVER.run("tensorscope", [str(a) for a in args], cwd, stdin, env, timeout)


# NOTE [One fork server per test process]
# Most tests run `python -m tensorscope` on a small program, and most of such a run's CPU is the import
# of torch (about 2 s). run_cli sends each run to one process per test process (tests/_forked.py
# --serve, started at the first run and ended with the test process) that imported torch and tensorscope
# once and forks a child per run. The child is what run_many's children are (tests/_forked.py): its own
# stdin, stdout, stderr, working directory and whole environment, argv and __main__, leaving as python
# leaves. What torch reads at its import cannot change in a child: a call whose environment differs from
# the server's in such a variable (_IMPORT_TIME) runs a process of its own, as does a call with fresh=True.
# run_many sends its runs to the same server, one at a time, when its environment is the tests' own in those
# variables (else one tests/_forked.py of its own per call, started with that environment): a run_many call
# then costs no torch import of its own (about 1.4 s of CPU per call measured loaded, 2026-11-26). It never
# starts the server with another environment, which would send every later run_cli to a fresh process.
# A run that outlives its timeout is killed and raises subprocess.TimeoutExpired, as subprocess.run does.
_IMPORT_TIME = ("PYTHON", "TORCH", "PYTORCH", "OMP_", "MKL", "KMP_", "OPENBLAS", "CUDA", "NVIDIA", "LD_",
                "MALLOC", "GLIBC")


def _import_time(env: dict) -> dict:
    return {k: v for k, v in env.items() if k.startswith(_IMPORT_TIME)}


class _ForkServer:
    def __init__(self):
        self.proc = None
        self.env = None
        self.lock = threading.Lock()
        self.tmp = None

    def can_run(self, env: dict) -> bool:
        return hasattr(os, "fork") and (self.env is None or _import_time(env) == _import_time(self.env))

    def _start(self, env: dict) -> None:
        self.env = env
        self.tmp = tempfile.mkdtemp(prefix="ts-serve-")
        self.proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "_forked.py"), "--serve"], cwd=REPO,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.proc is not None:
            self.proc.stdout.close()  # else "ResourceWarning: unclosed file" as the test process ends
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _reply(self, deadline: float | None):
        ready = select.select([self.proc.stdout], [], [], None if deadline is None else max(0.0, deadline - time.monotonic()))[0]
        if not ready:
            return None
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"tests/_forked.py --serve ended (status {self.proc.poll()})")
        return json.loads(line)

    def run(self, kind, args, cwd, stdin, env, timeout, text=True, overlay=None) -> tuple:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start(env)
            out, err, inp = (os.path.join(self.tmp, name) for name in ("out", "err", "in"))
            job = {"kind": kind, "args": args, "cwd": str(cwd), "out": out, "err": err, "environ": env,
                   "env": overlay or {}}
            if stdin is not None:
                Path(inp).write_bytes(stdin.encode() if isinstance(stdin, str) else stdin)
                job["stdin"] = inp
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
            pid = self._reply(None)["pid"]
            reply = self._reply(time.monotonic() + timeout)
            if reply is None:  # a hang: killed, as subprocess.run kills it
                os.kill(pid, signal.SIGKILL)
                self._reply(None)
                raise subprocess.TimeoutExpired([kind, *args], timeout)
            return _result(kind, args, reply["status"], Path(out).read_bytes(), Path(err).read_bytes(), text)


def _shared_server() -> _ForkServer:
    """The test process's one server, whether this file was imported as `_cli` or as `tests._cli` first."""
    for name in ("_cli", "tests._cli"):
        server = getattr(sys.modules.get(name), "_FORK_SERVER", None)
        if server is not None:
            return server
    return _ForkServer()


_FORK_SERVER = _shared_server()


def load_report(text: str) -> Any:
    """A JSON report as a reader sees it whole: a compact document (the default form) is checked
    against the schema as written, then expanded to the full form (tensorscope.compact.expand)."""
    from tensorscope.compact import expand

    doc = json.loads(text)
    if isinstance(doc, dict) and doc.get("form") == "compact":
        validate_against_schema(doc)
        doc = expand(doc)
    return doc

def run_many(jobs: list[tuple], *, timeout: float = DEFAULT_TIMEOUT, text: bool = True,
             env: dict | None = None) -> list[tuple]:
    """Many runs in one process tree (tests/_forked.py): each job's result, in order.

    A job is ``("python", PATH, *ARGS)`` (answered like run_python) or ``("tensorscope", *ARGS)``
    (answered like run_cli), with an optional dict last: ``cwd=``, ``stdin=`` (bytes or str; else
    /dev/null) and ``env=`` (variables set, or removed where None, in that run only: for variables read
    at run time, not at torch's import). torch and tensorscope are imported once and each run is a fork
    of that process, so the runs share nothing else; the saving is one torch import per run (~2 s of
    CPU). ``text=False`` gives stdout and stderr as bytes. ``env=`` sets (None: removes) variables in the
    environment of the process the runs fork from, which torch's import reads too (OMP_NUM_THREADS).
    The process the runs fork from is the test process's fork server (NOTE [One fork server per test
    process]) when the call's environment is the tests' own in every variable read at torch's import,
    else a `tests/_forked.py` of this call's own: either way the same children, one at a time.
    Runs on platforms without ``os.fork`` go one process each.
    """
    base = _env()
    for name, value in (env or {}).items():
        if value is None:
            base.pop(name, None)
        else:
            base[name] = value
    specs = []
    for job in jobs:
        opts = job[-1] if isinstance(job[-1], dict) else {}
        kind, *args = job[:-1] if opts else job
        specs.append((kind, [str(a) for a in args], opts))
    if not hasattr(os, "fork"):
        return [_one_process(kind, args, opts, text, base) for kind, args, opts in specs]
    if _import_time(base) == _import_time(_env()) and _FORK_SERVER.can_run(base):
        # the test process's fork server, already started or started now with the tests' own environment
        # (NOTE [One fork server per test process]): no torch import of its own for this call
        return [_FORK_SERVER.run(kind, args, opts.get("cwd", REPO), opts.get("stdin"), base, timeout, text,
                                 opts.get("env", {}))
                for kind, args, opts in specs]
    with tempfile.TemporaryDirectory(prefix="ts-many-") as tmp:
        listed = []
        for i, (kind, args, opts) in enumerate(specs):
            job = {"kind": kind, "args": args, "cwd": str(opts.get("cwd", REPO)),
                   "out": os.path.join(tmp, f"{i}.out"), "err": os.path.join(tmp, f"{i}.err"),
                   "env": opts.get("env", {})}
            if opts.get("stdin") is not None:
                job["stdin"] = os.path.join(tmp, f"{i}.in")
                data = opts["stdin"]
                Path(job["stdin"]).write_bytes(data.encode() if isinstance(data, str) else data)
            listed.append(job)
        plan = os.path.join(tmp, "jobs.json")
        with open(plan, "w") as f:
            json.dump(listed, f)
        proc = subprocess.run([sys.executable, str(REPO / "tests" / "_forked.py"), plan], cwd=REPO, env=base,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout * max(1, len(jobs)))
        if proc.returncode != 0:
            raise AssertionError(f"tests/_forked.py failed ({proc.returncode}): {proc.stderr[-2000:]}")
        statuses = json.loads(proc.stdout.strip().splitlines()[-1])
        results = []
        for job, status in zip(listed, statuses):
            out, err = Path(job["out"]).read_bytes(), Path(job["err"]).read_bytes()
            results.append(_result(job["kind"], job["args"], status, out, err, text))
    return results


def runs_of_selected_tests(request, here, jobs: dict, env: dict | None = None) -> dict:
    """The runs of the tests of file HERE that this session selected, all in one run_many.

    JOBS is {test function name: {label: job}} (jobs as run_many takes them); the answer is
    {test function name: {label: result}} for the selected tests only (every test in a full run; with
    -k only those, so a partial run starts only their runs). ENV: as run_many's."""
    selected = {getattr(item, "originalname", None) for item in request.session.items
                if Path(str(item.fspath)).resolve() == Path(here).resolve()}
    wanted = [(test, label, job) for test, labelled in jobs.items() if test in selected
              for label, job in labelled.items()]
    found: dict = {}
    for (test, label, _), result in zip(wanted, run_many([job for _, _, job in wanted], env=env) if wanted else []):
        found.setdefault(test, {})[label] = result
    return found


def _result(kind: str, args: list[str], status: int, out: bytes, err: bytes, text: bool) -> tuple:
    if text:  # as `subprocess.run(text=True)` and `read_text` give them: universal newlines
        out, err = (b.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n") for b in (out, err))
    if kind == "python":
        return status, out, err
    doc = None
    if "--json" in args:
        try:
            doc = load_report(out)
        except ValueError:
            doc = None
    return status, out, err, doc


def _one_process(kind: str, args: list[str], opts: dict, text: bool, base: dict) -> tuple:
    """One job in a process of its own (where there is no fork)."""
    env = dict(base)
    for name, value in opts.get("env", {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    stdin = opts.get("stdin")
    cmd = [sys.executable, *(args if kind == "python" else ["-m", "tensorscope", *args])]
    proc = subprocess.run(cmd, cwd=str(opts.get("cwd", REPO)), env=env, capture_output=True,
                          input=stdin.encode() if isinstance(stdin, str) else stdin,
                          stdin=subprocess.DEVNULL if stdin is None else None, timeout=DEFAULT_TIMEOUT)
    return _result(kind, args, proc.returncode, proc.stdout, proc.stderr, text)


def find_tensors(doc: dict, name: str) -> list[dict]:
    """Every tensor record whose `names` include NAME."""
    return [t for t in doc.get("tensors", []) if name in (t.get("names") or [])]


def find_tensor(doc: dict, name: str) -> dict:
    """The tensor record whose `names` include NAME (the alive one if several)."""
    found = find_tensors(doc, name)
    if len(found) > 1:
        alive = [t for t in found if t.get("alive")]
        if len(alive) == 1:
            found = alive
    if len(found) != 1:
        summary = [(t.get("id"), t.get("names"), t.get("alive")) for t in doc.get("tensors", [])]
        raise AssertionError(f"expected exactly one tensor named {name!r}, found {len(found)}; "
                             f"tensors in report: {summary}")
    return found[0]


def tensor_by_id(doc: dict, tid: str) -> dict:
    for t in doc.get("tensors", []):
        if t.get("id") == tid:
            return t
    raise AssertionError(f"no tensor with id {tid!r} in report")


def storage_by_id(doc: dict, sid: str) -> dict:
    for s in doc.get("storages", []):
        if s.get("id") == sid:
            return s
    raise AssertionError(f"no storage with id {sid!r} in report")


def counter_by_id(doc: dict, vid: str) -> dict:
    for v in doc.get("version_counters", []):
        if v.get("id") == vid:
            return v
    raise AssertionError(f"no version counter with id {vid!r} in report")


def find_events(doc: dict, kind: str, **match: Any) -> list[dict]:
    """Events of KIND whose fields equal every MATCH item."""
    return [e for e in doc.get("events", [])
            if e.get("kind") == kind and all(e.get(k) == v for k, v in match.items())]


def load_schema() -> dict | None:
    if not SCHEMA_PATH.exists():
        return None
    return json.loads(SCHEMA_PATH.read_text())


_VALIDATORS: dict[str, Any] = {}


def _validator(text: str):
    """The validator of the schema whose text is TEXT, built (and the schema checked against its
    metaschema: ~0.12 s, 80 times the cost of validating a report) once per process and schema text."""
    if text not in _VALIDATORS:
        import jsonschema

        schema = json.loads(text)
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        _VALIDATORS[text] = cls(schema)
    return _VALIDATORS[text]


def validate_against_schema(doc: Any) -> bool:
    """Validate DOC against tensorscope's JSON schema; False when the schema file is absent."""
    if not SCHEMA_PATH.exists():
        return False
    _validator(SCHEMA_PATH.read_text()).validate(doc)
    return True


def line_of(path: str | os.PathLike, code: str) -> int:
    """1-based number of the single line of PATH whose code (before any comment) contains CODE."""
    hits = [i for i, line in enumerate(Path(path).read_text().splitlines(), 1)
            if code in line.split("#", 1)[0]]
    if len(hits) != 1:
        raise AssertionError(f"{code!r} found on lines {hits} of {path}, expected exactly one")
    return hits[0]


def selected_programs(request, programs, here):
    """The programs of PROGRAMS that the session's selected tests of file HERE ask for (every one in a
    full run; with -k only those, so a partial run starts only their processes)."""
    names = set()
    for item in request.session.items:
        if Path(str(item.fspath)).resolve() != Path(here).resolve() or "results" not in item.fixturenames:
            continue
        prog = getattr(getattr(item, "callspec", None), "params", {}).get("prog")
        if prog is None:
            return list(programs)  # a test over the whole corpus
        names.add(prog.name)
    return [p for p in programs if p.name in names]
