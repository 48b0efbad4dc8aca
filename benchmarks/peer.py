"""Peer suites: run a pytest/unittest file under plain python and under tensorscope, test by test.

Usage (from the repository root, inside the venv)::

    python benchmarks/peer.py PATH_TO_TEST_FILE [...] [--jobs N] [--out DIR] [--resume] [-k EXPR]

For every file, the test ids are collected with ``pytest --collect-only`` and then
run twice, by the same tiny launcher program (``pytest.main(argv)``):

``tensorscope``  ``python -m tensorscope run -o DIR/<file>/ts-<seg>.json LAUNCHER -- ARGS``
``python``       ``python LAUNCHER ARGS``

With ``--explain`` the tensorscope side is ``tensorscope explain -o`` instead, the command that adds
saved-tensor hooks and hooks on every node of each backward.  Its documented limit (a program
that inspects saved variables sees tensorscope's hooks) makes some of PyTorch's own autograd
tests differ on purpose; read each difference against docs/how-it-works.md's known limits.

A small pytest plugin (written next to the launcher, in DIR) appends one JSON line
when a test starts and one when it finishes (outcome, failure message, captured
output), flushed at once, so a process that dies (a segfault) loses nothing: the
test that started and never finished is recorded as ``crash`` and the run resumes
with the next test in a fresh process.  The python side is cut into the same
segments (a fresh process after every test that crashed under tensorscope), so both
sides see the same process history.

Per test the two sides are compared on the outcome (passed, failed, skipped, xfail,
xpass, error, crash, timeout) and on the failure message and captured
stdout/stderr/log, with addresses, timings, temporary paths and column padding
scrubbed.  A test whose outcome is the same but whose text differs is run once more
under plain python (a control run): when python disagrees with itself too (log lines
with a clock), the test is counted as ``nondeterministic`` rather than different.  The rows
of a torch.profiler table sorted by a measured time are compared in a fixed order (their
order is the clock's), so such a table differs only by its rows.  The summary gives identical / different /
crash counts per file and the first differing line of every different test;
DIR/results.json holds everything.

Both sides get the same environment: PYTHONHASHSEED=0, CUDA hidden (CPU only) unless --cuda,
PYTHONWARNINGS unset, ``-p no:cacheprovider``.  One shim is applied on both sides at
run time, never by editing the copies: newer test files import
``HardwareClassification`` from torch.testing._internal.common_utils, which
torch 2.13 lacks; the plugin defines a stand-in when it is missing.

--resume reuses the per-side records already in DIR and runs only what is missing.
Exit status: 0 when every test is identical, 1 when some differ, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SIDES = ("tensorscope", "python")
CONTROL = "control"  # a second plain-python run of the tests whose text differs: is python itself stable?
DEFAULT_TEST_TIMEOUT = 600.0

LAUNCHER = '''"""Run pytest with the arguments given: the program both sides of the peer harness run."""
import sys

import pytest

sys.exit(pytest.main(sys.argv[1:]))
'''

# The plugin is written as a file into the output directory and loaded with -p; it is
# the only code of ours that runs inside the test process, on both sides alike.
PLUGIN = r'''"""Peer-harness pytest plugin: select tests, record each result as one flushed JSON line."""
import json
import os

_OUT = None
_RESULTS = {}


def _write(record):
    _OUT.write(json.dumps(record) + "\n")
    _OUT.flush()


def _shim():
    # Newer PyTorch test files import a name torch 2.13 lacks; add a stand-in, never edit them.
    try:
        import torch.testing._internal.common_utils as cu
    except Exception:
        return
    if not hasattr(cu, "HardwareClassification"):
        import enum

        class HardwareClassification(enum.Enum):
            GENERIC = "generic"
            ACCELERATOR = "accelerator"

        cu.HardwareClassification = HardwareClassification


def pytest_configure(config):
    global _OUT
    path = os.environ.get("PEER_RESULTS")
    if path:
        _OUT = open(path, "a", encoding="utf-8")
    _shim()


def pytest_collection_modifyitems(session, config, items):
    path = os.environ.get("PEER_SELECT")
    if not path:
        return
    with open(path, encoding="utf-8") as f:
        wanted = [line.rstrip("\n") for line in f if line.strip()]
    order = {nodeid: i for i, nodeid in enumerate(wanted)}
    kept = [item for item in items if item.nodeid in order]
    kept.sort(key=lambda item: order[item.nodeid])
    items[:] = kept


def pytest_runtest_logstart(nodeid, location):
    _RESULTS[nodeid] = []
    if _OUT:
        _write({"event": "start", "nodeid": nodeid})


def pytest_runtest_logreport(report):
    _RESULTS.setdefault(report.nodeid, []).append(report)


def _text(report):
    if report.longrepr is None:
        return ""
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return str(report.longrepr[2])
    return str(report.longrepr)


def _outcome(reports):
    by_when = {r.when: r for r in reports}
    setup, call, teardown = by_when.get("setup"), by_when.get("call"), by_when.get("teardown")
    message = ""
    if setup is not None and setup.failed:
        outcome, message = "error", _text(setup)
    elif setup is not None and setup.skipped:
        outcome = "xfail" if hasattr(setup, "wasxfail") else "skipped"
        message = _text(setup)
    elif call is None:
        outcome = "error"
    elif call.failed:
        outcome, message = ("xpass" if hasattr(call, "wasxfail") else "failed"), _text(call)
    elif call.skipped:
        outcome = "xfail" if hasattr(call, "wasxfail") else "skipped"
        message = getattr(call, "wasxfail", "") or _text(call)
    else:
        outcome = "xpass" if hasattr(call, "wasxfail") else "passed"
    if teardown is not None and teardown.failed:
        outcome = "error" if outcome == "passed" else outcome
        message = (message + "\n" if message else "") + _text(teardown)
    last = reports[-1] if reports else None
    out = {"outcome": outcome, "message": message}
    if last is not None:
        out["stdout"] = last.capstdout
        out["stderr"] = last.capstderr
        out["log"] = last.caplog
    return out


def pytest_runtest_logfinish(nodeid, location):
    if _OUT:
        record = {"event": "finish", "nodeid": nodeid}
        record.update(_outcome(_RESULTS.pop(nodeid, [])))
        _write(record)
'''

# --- scrubbing: what legitimately differs between two runs of the same program
_SCRUBS = [
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?: \d+:\d+)?"), "<date>"),
    (re.compile(r"/tmp/[\w.\-/]+"), "/tmp/?"),
    (re.compile(r"\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\s?(?:s|ms|us|µs|ns|sec|seconds)\b"), "<time>"),
    (re.compile(r"\b\d+(?:\.\d+)?%"), "<pct>"),
    (re.compile(r"\bpid[ =:]\s*\d+", re.I), "pid ?"),
    (re.compile(r"-{3,}"), "---"),
    (re.compile(r"[ \t]+"), " "),
]


def scrub(text: str) -> str:
    text = text or ""
    for pattern, repl in _SCRUBS:
        text = pattern.sub(repl, text)
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


# --- torch.profiler tables sorted by a measured time
# ``prof.key_averages().table(sort_by="self_cpu_time_total")`` prints one row per op, ordered by the time
# each op took in this run: two runs of the same program list the same rows in an order the clock picks
# (the times themselves are scrubbed). Such a table is recognised by what it is -- a dashed rule, a header
# with ``Name``, a rule, rows, a rule -- whose rows run from the largest to the smallest value of one of its
# time columns; its rows are then compared in a fixed order. A table in another order (``sort_by="count"``,
# or none) keeps its order, and a row that is missing or differs still differs.
_RULE = re.compile(r"^\s*-{3,}(?:\s+-{3,})+\s*$")
_TIME = re.compile(r"^(\d+(?:\.\d+)?)(ns|us|ms|s)$")
_UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def _cells(line: str) -> list:
    return re.split(r"\s{2,}", line.strip())


def _by_time(rows: list) -> bool:
    """True when some column of the rows holds times only, from the largest down."""
    cells = [_cells(r) for r in rows]
    if len(cells) < 2 or len({len(c) for c in cells}) != 1:
        return False
    for col in range(1, len(cells[0])):
        times = [_TIME.match(c[col]) for c in cells]
        if all(times):
            values = [float(m.group(1)) * _UNIT[m.group(2)] for m in times]
            if all(x >= y for x, y in zip(values, values[1:])):
                return True
    return False


def time_sorted_tables_in_order(text: str) -> str:
    """``text`` with the rows of every profiler table sorted by a measured time put in a fixed order."""
    lines = (text or "").splitlines()
    i = 0
    while i + 2 < len(lines):
        if _RULE.match(lines[i]) and "Name" in _cells(lines[i + 1]) and _RULE.match(lines[i + 2]):
            end = i + 3
            while end < len(lines) and not _RULE.match(lines[end]) and lines[end].strip():
                end += 1
            rows = lines[i + 3:end]
            if end < len(lines) and _RULE.match(lines[end]) and _by_time(rows):
                lines[i + 3:end] = sorted(rows, key=scrub)
            i = end
        else:
            i += 1
    return "\n".join(lines)


def first_difference(a: dict, b: dict, names=("tensorscope", "python")) -> str | None:
    """The first line that differs between two test records (by default: tensorscope side, python side)."""
    na, nb = names
    if a["outcome"] != b["outcome"]:
        line = f"outcome: {a['outcome']} under {na}, {b['outcome']} under {nb}"
        if a["outcome"] in ("crash", "timeout"):
            line += f" ({a.get('message', '')})"
        elif a.get("message"):
            line += f"; {na}: {_first_line(a['message'])}"
        elif b.get("message"):
            line += f"; {nb}: {_first_line(b['message'])}"
        return line
    for key in ("message", "stdout", "stderr", "log"):
        la, lb = (scrub(time_sorted_tables_in_order(r.get(key, ""))).splitlines() for r in (a, b))
        for i in range(max(len(la), len(lb))):
            x = la[i] if i < len(la) else "<end>"
            y = lb[i] if i < len(lb) else "<end>"
            if x != y:
                return f"{key} line {i + 1}: {na} {x!r} | {nb} {y!r}"
    return None


def _first_line(text: str) -> str:
    lines = [l for l in scrub(text).splitlines() if l.strip()]
    for l in lines:  # pytest's short tracebacks put the error on a line starting with "E "
        if l.startswith("E "):
            return l[2:].strip()[:200]
    return (lines[-1] if lines else "")[:200]


# --- environment and processes
# --explain: the tensorscope side runs `tensorscope explain` instead of `run` (set by main)
COMMAND = "run"

# --cuda: the GPUs stay visible, so the files' CUDA variants run too (set by main)
KEEP_CUDA = False


def child_env(support: Path) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    env["PYTHONHASHSEED"] = "0"
    if not KEEP_CUDA:
        env["CUDA_VISIBLE_DEVICES"] = ""
    env["PYTHONPATH"] = os.pathsep.join([str(support)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def pytest_args(test_file: Path, support: Path) -> list:
    # -c: our own empty ini, so no project's addopts or conftest.py above the file changes the run.
    return [str(test_file), "-c", str(support / "pytest.ini"), "--rootdir", str(test_file.parent),
            "-p", "no:cacheprovider", "-p", "no:tensorscope", "-p", "_peer_plugin", "-q", "--tb=short"]


def collect(test_file: Path, support: Path, k: str | None) -> list:
    cmd = [sys.executable, "-m", "pytest", "--collect-only", *pytest_args(test_file, support)]
    if k:
        cmd += ["-k", k]
    proc = subprocess.run(cmd, cwd=test_file.parent, env=child_env(support), capture_output=True, text=True)
    ids = [line.strip() for line in proc.stdout.splitlines() if "::" in line and not line.startswith(" ")]
    if not ids:
        raise RuntimeError(f"no tests collected from {test_file} (exit {proc.returncode}):\n"
                           + "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:]))
    return ids


def _signal_name(code: int) -> str:
    try:
        return f"{signal.Signals(-code).name}, exit {code}"
    except ValueError:
        return f"exit {code}"


class FileRun:
    """Both sides of one test file: records on disk (resumable), segments, processes."""

    def __init__(self, test_file: Path, out: Path, support: Path, test_timeout: float):
        self.test_file = test_file
        self.dir = out / test_file.stem
        self.dir.mkdir(parents=True, exist_ok=True)
        self.support = support
        self.test_timeout = test_timeout
        self.lock = threading.Lock()
        self.seq = 0
        self.records = {side: self._load(side) for side in (*SIDES, CONTROL)}

    def _side_path(self, side: str) -> Path:
        return self.dir / f"{side}.jsonl"

    def _load(self, side: str) -> dict:
        path = self._side_path(side)
        records = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    rec = json.loads(line)
                    records[rec["nodeid"]] = rec
        return records

    def _store(self, side: str, recs: list) -> None:
        with self.lock:
            with open(self._side_path(side), "a", encoding="utf-8") as f:
                for rec in recs:
                    self.records[side][rec["nodeid"]] = rec
                    f.write(json.dumps(rec) + "\n")

    def _next_seq(self) -> int:
        with self.lock:
            self.seq += 1
            return self.seq

    def run_chunk(self, ids: list) -> None:
        todo = [i for i in ids if i not in self.records["tensorscope"]]
        self._run_side("tensorscope", todo, boundaries=set())
        crashed = {i for i in ids if self.records["tensorscope"].get(i, {}).get("outcome") in ("crash", "timeout")}
        todo = [i for i in ids if i not in self.records["python"]]
        self._run_side("python", todo, boundaries=crashed)

    def run_control(self, ids: list) -> None:
        todo = [i for i in ids if i not in self.records[CONTROL]]
        if todo:
            self._run_side(CONTROL, todo, boundaries=set())

    def _run_side(self, side: str, ids: list, boundaries: set) -> None:
        remaining = list(ids)
        while remaining:
            cut = next((n for n, i in enumerate(remaining) if i in boundaries), len(remaining) - 1)
            segment = remaining[:cut + 1]
            done = self._run_segment(side, segment)
            remaining = [i for i in remaining if i not in done]

    def _run_segment(self, side: str, segment: list) -> set:
        seq = self._next_seq()
        tag = f"{ {'tensorscope': 'ts', 'python': 'py'}.get(side, 'pc')}-{seq:04d}"
        select, raw = self.dir / f"{tag}.select", self.dir / f"{tag}.raw.jsonl"
        select.write_text("\n".join(segment) + "\n", encoding="utf-8")
        raw.write_text("", encoding="utf-8")
        launcher = self.support / "_peer_launch.py"
        args = pytest_args(self.test_file, self.support)
        if side == "tensorscope":
            cmd = [sys.executable, "-m", "tensorscope", COMMAND, "-o", str(self.dir / f"{tag}.report.json"),
                   str(launcher), "--", *args]
        else:
            cmd = [sys.executable, str(launcher), *args]
        env = child_env(self.support)
        env["PEER_SELECT"], env["PEER_RESULTS"] = str(select), str(raw)
        proc = subprocess.Popen(cmd, cwd=self.test_file.parent, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        stderr_chunks = []
        reader = threading.Thread(target=lambda: stderr_chunks.append(proc.stderr.read()), daemon=True)
        reader.start()
        timed_out = self._watch(proc, raw)
        reader.join(timeout=10)
        started, finished = self._parse(raw)
        recs = list(finished.values())
        done = set(finished)
        pending = [i for i in started if i not in finished]
        if pending:  # the process died (or was stopped) inside this test
            reason = "timeout" if timed_out else "crash"
            detail = (f"no result within {self.test_timeout:g} s" if timed_out
                      else f"process died: {_signal_name(proc.returncode)}")
            err = b"".join(c for c in stderr_chunks if c).decode("utf-8", "replace").strip().splitlines()
            fatal = [l for l in err if l.startswith("Fatal Python error")]
            tail = (fatal or err or [""])[-1]
            recs.append({"event": "finish", "nodeid": pending[-1], "outcome": reason,
                         "message": detail, "stderr_tail": tail[:300]})
            done.add(pending[-1])
        elif proc.returncode not in (0, 1, 5) and not finished:
            # The process failed before running anything (collection error): record it for every
            # test of the segment rather than retrying forever.
            tail = b"".join(c for c in stderr_chunks if c).decode("utf-8", "replace").strip().splitlines()
            for i in segment:
                recs.append({"event": "finish", "nodeid": i, "outcome": "error",
                             "message": f"no test ran ({_signal_name(proc.returncode)}): " + (tail[-1] if tail else "")})
            done = set(segment)
        never_ran = [i for i in segment if i not in done and not pending]
        if never_ran and proc.returncode in (0, 1, 5):
            for i in never_ran:  # finished normally but not run: not collected this time
                recs.append({"event": "finish", "nodeid": i, "outcome": "missing", "message": "not collected"})
            done.update(never_ran)
        for rec in recs:
            rec["side"], rec["segment"] = side, tag
        self._store(side, recs)
        select.unlink(missing_ok=True)
        return done

    def _watch(self, proc, raw: Path) -> bool:
        """Wait for the process; stop it when one test runs longer than the test timeout."""
        last_change, last_size = time.monotonic(), -1
        while proc.poll() is None:
            time.sleep(0.5)
            size = raw.stat().st_size if raw.exists() else 0
            if size != last_size:
                last_change, last_size = time.monotonic(), size
            elif time.monotonic() - last_change > self.test_timeout:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
                return True
        return False

    @staticmethod
    def _parse(raw: Path):
        started, finished = [], {}
        for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a half-written last line of a killed process
            if rec.get("event") == "start":
                started.append(rec["nodeid"])
            elif rec.get("event") == "finish":
                finished[rec["nodeid"]] = rec
        return started, finished


def chunks(ids: list, n: int) -> list:
    if not ids:
        return []
    n = max(1, min(n, len(ids)))
    size = -(-len(ids) // n)
    return [ids[i:i + size] for i in range(0, len(ids), size)]


def text_only(ids: list, run: FileRun) -> list:
    """Tests whose outcome is the same on both sides but whose text differs."""
    out = []
    for nodeid in ids:
        ts, py = run.records["tensorscope"].get(nodeid), run.records["python"].get(nodeid)
        if ts and py and ts["outcome"] == py["outcome"] and first_difference(ts, py):
            out.append(nodeid)
    return out


def compare(ids: list, run: FileRun) -> list:
    rows = []
    for nodeid in ids:
        ts, py = run.records["tensorscope"].get(nodeid), run.records["python"].get(nodeid)
        if ts is None or py is None:
            rows.append({"test": nodeid, "verdict": "incomplete", "first_difference": "not run on both sides"})
            continue
        diff = first_difference(ts, py)
        verdict = "identical" if diff is None else ("crash" if ts["outcome"] in ("crash", "timeout") else "different")
        again = run.records[CONTROL].get(nodeid)
        unstable = (first_difference(again, py, ("python (control run)", "python"))
                    if (verdict == "different" and again) else None)
        if unstable:  # python differs from python: the text is not a property of the program
            verdict = "nondeterministic"
        rows.append({"test": nodeid, "verdict": verdict, "first_difference": diff,
                     "python_vs_python": unstable,
                     "tensorscope": {k: ts.get(k, "") for k in ("outcome", "message", "stdout", "stderr", "log", "segment")},
                     "python": {k: py.get(k, "") for k in ("outcome", "message", "stdout", "stderr", "log", "segment")}})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="test files (local copies)")
    ap.add_argument("--jobs", type=int, default=1, help="test chunks run side by side (default 1)")
    ap.add_argument("--out", default="peer_out", help="directory for records and results (default ./peer_out)")
    ap.add_argument("--resume", action="store_true", help="keep the records already in --out; run what is missing")
    ap.add_argument("-k", dest="k", default=None, help="pytest -k expression selecting tests")
    ap.add_argument("--cuda", action="store_true", help="leave the GPUs visible: the files' CUDA tests run too")
    ap.add_argument("--explain", action="store_true",
                    help="run the tensorscope side as `tensorscope explain -o` instead of `tensorscope run -o`")
    ap.add_argument("--test-timeout", type=float, default=DEFAULT_TEST_TIMEOUT,
                    help="seconds one test may run before it is stopped and recorded as timeout")
    opts = ap.parse_args(argv)
    global KEEP_CUDA, COMMAND
    KEEP_CUDA = opts.cuda
    COMMAND = "explain" if opts.explain else "run"

    files = [Path(f).resolve() for f in opts.files]
    for f in files:
        if not f.is_file():
            print(f"peer: no such test file: {f}", file=sys.stderr)
            return 2
    out = Path(opts.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    support = out / "support"
    support.mkdir(exist_ok=True)
    (support / "_peer_launch.py").write_text(LAUNCHER, encoding="utf-8")
    (support / "_peer_plugin.py").write_text(PLUGIN, encoding="utf-8")
    (support / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")

    import torch  # only to report the version the figures are for

    results = {"torch": torch.__version__, "python": sys.version.split()[0], "command": COMMAND,
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "files": {}}
    any_diff = False
    for f in files:
        if not opts.resume:
            for side in (*SIDES, CONTROL):
                (out / f.stem / f"{side}.jsonl").unlink(missing_ok=True)
        try:
            ids = collect(f, support, opts.k)
        except RuntimeError as e:
            print(f"peer: {e}", file=sys.stderr)
            return 2
        run = FileRun(f, out, support, opts.test_timeout)
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
            list(pool.map(run.run_chunk, chunks(ids, opts.jobs)))
            list(pool.map(run.run_control, chunks(text_only(ids, run), opts.jobs)))
        rows = compare(ids, run)
        counts = {v: sum(r["verdict"] == v for r in rows)
                  for v in ("identical", "different", "crash", "nondeterministic", "incomplete")}
        results["files"][str(f)] = {"tests": len(ids), **counts, "seconds": round(time.monotonic() - t0, 1),
                                    "results": rows}
        differing = counts["different"] + counts["crash"]
        any_diff = any_diff or differing > 0 or counts["incomplete"] > 0
        print(f"{f.name}: {len(ids)} tests, {counts['identical']} identical, {differing} different "
              f"({counts['crash']} crash)"
              + (f", {counts['nondeterministic']} nondeterministic under python" if counts["nondeterministic"] else "")
              + (f", {counts['incomplete']} incomplete" if counts["incomplete"] else ""))
        for r in rows:
            if r["verdict"] in ("different", "crash", "incomplete"):
                print(f"  {r['verdict']:9} {r['test']}\n            {r['first_difference']}")
        for r in rows:
            if r["verdict"] == "nondeterministic":
                print(f"  nondeterministic {r['test']}\n            python vs python: {r['python_vs_python']}")
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"results: {out / 'results.json'}")
    return 1 if any_diff else 0


if __name__ == "__main__":
    sys.exit(main())
