"""tensorscope benchmark runner: whole-process wall time and peak RSS, per workload and mode.

Usage (from the repository root, inside the venv)::

    python benchmarks/run.py                      # all workloads, 5 repeats, scale 1
    python benchmarks/run.py --repeats 3
    python benchmarks/run.py --workloads mlp_train,python_heavy --scale 0.5
    python benchmarks/run.py --modes plain,anomaly          # before the CLI exists
    python benchmarks/run.py --mode ts-ops="python -m tensorscope run --ops -o {report}"

Every workload in ``benchmarks/workloads/`` is run as a WHOLE PROCESS (so
interpreter start-up, ``import torch``, instrumentation set-up and report writing
are all counted) under each mode:

``plain``
    ``python W``
``tensorscope``
    ``python -m tensorscope run -o <tmp>/report.json W``
``tensorscope-text``
    ``python -m tensorscope run W``: the default terminal report on stdout (a file
    here, so rich renders it plain at 80 columns)
``tensorscope-no-retention`` (opt-in)
    ``tensorscope`` with ``TENSORSCOPE_NO_RETENTION=1``: without the retention walks (docs/retention.md),
    to show their cost beside ``tensorscope``
``tensorscope-no-lines`` (opt-in)
    ``tensorscope`` with ``TENSORSCOPE_NO_LINES=1``: without the line record that names every autograd
    node's forward line on Python 3.12 and later, to show its cost beside ``tensorscope``
``tensorscope-explain``, ``tensorscope-check-values`` (named with ``--modes``)
    ``python -m tensorscope explain -o <tmp>/report.json W`` and ``... run --check-values ...``:
    saved-tensor hooks, the non-finite checks and the hooks on backward's nodes that find where a
    NaN/Inf was born (TENSORSCOPE_ORIGIN_MODE=1 in the environment: the per-op dispatch mode instead), beside
    ``anomaly`` (whose ``set_detect_anomaly(True)`` checks backward outputs for NaN, ``check_nan``
    being on by default)
``anomaly``
    ``python benchmarks/anomaly.py W`` -- ``torch.autograd.set_detect_anomaly(True)``
    then ``runpy.run_path(W, run_name="__main__")``: PyTorch's own debugging aid,
    the bar tensorscope is compared against.
``--mode NAME=CMDPREFIX`` (repeatable)
    any extra mode: CMDPREFIX is split with ``shlex`` and the workload path is
    appended.  A leading ``python`` token is replaced by the benchmark
    interpreter (``--python``, default: the one running this script);
    ``{python}`` and ``{report}`` placeholders are substituted (``{report}`` is a
    fresh per-run JSON path; when present, the report's ``events_summary`` is read
    back like the tensorscope mode's).

The size of each workload is passed in the environment as ``TS_BENCH_SCALE``
(``--scale``, default 1.0).  All modes get the same environment; the children
run with the repository root as working directory and on ``PYTHONPATH``.

Scheduling: for each workload, one warm-up round (every mode once, discarded;
``--warmup N`` to change) and then ``--repeats`` rounds (default 5).  Inside a
round modes run round-robin (plain, tensorscope, anomaly, extra...), so slow
drift of the machine hits every mode alike.  Tasks go through one
``concurrent.futures`` pool of ``--jobs`` workers (default 1).  With ``--jobs``
> 1 processes of different modes run side by side and compete for cores and
memory bandwidth -- on a 2-core machine (torch also uses 2 intra-op threads per
process) this adds a lot of noise and inflates every time; use ``--jobs 1`` for
numbers you report and >1 only for quick smoke runs.

On a shared or busy machine use ``--torch-threads 1`` (sets ``OMP_NUM_THREADS``
and ``MKL_NUM_THREADS`` for every child, all modes alike): torch's 2-thread
intra-op pool degrades pathologically when the cores are oversubscribed
(mlp_train 3.5 s -> 150 s plain at load average 10).  The table header shows the
load average at start and end; the CPU-time columns (user+sys of the child, from
``wait4``) are far less sensitive to other load than wall time.

Measurements, per process:

* wall time: ``time.perf_counter()`` around ``subprocess.Popen`` .. ``os.wait4``.
* peak RSS: ``ru_maxrss`` of the ``rusage`` returned by ``os.wait4(pid, 0)``
  (kilobytes on Linux).  It is the child's own high-water mark, maxed with that of
  any descendants the child waited for -- so a tool that runs the program in a
  grandchild process is still measured correctly.

Per (workload, mode): median wall time, the ratio to plain (the median of the
per-round ratios ``t_mode[r] / t_plain[r]``, which cancels drift between rounds),
median peak RSS and its per-round ratio to plain, and for report-writing modes
the report's ``events_summary.recorded`` / ``aggregated`` counts and the report
size (to show that the event log stays bounded).

Targets (checked for ``tensorscope``, ``tensorscope-text`` and every extra ``--mode``;
only meaningful at ``--scale 1``):

* mlp_train: time ratio <= 1.3 and median wall time below ``anomaly`` in the same run;
* gpt_train: time ratio <= 1.10 (``tensorscope-text``: <= 1.15) and below ``anomaly``;
* wide_model: time ratio <= 1.3;
* python_heavy: time ratio <= 2.0;
* seed_snippet: start-up, median(mode) - median(plain) <= 0.3 s;
* every workload: peak RSS ratio <= 1.1;
* many_events: event-log memory bounded -- peak RSS ratio <= 1.1.

Output: a Markdown table (and the target checks) on stdout, and the same data
as JSON in ``--out`` (default ``benchmarks/results/latest.json``; that directory
is gitignored), including machine info (CPU model, core count, Python / torch
versions, torch threads).  The exit status is 0 when every process ran and
exited 0 (targets FAILing do not change it -- this is a benchmark, not a test),
1 when some run failed or timed out, 2 on a usage error.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as _dt
import json
import math
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
WORKLOAD_DIR = BENCH_DIR / "workloads"
DEFAULT_OUT = BENCH_DIR / "results" / "latest.json"
DEFAULT_WORKLOADS = ["seed_snippet", "mlp_train", "python_heavy", "memory_churn", "many_events", "gpt_train",
                     "wide_model", "small_mlp", "generated_script", "short_lived", "many_params"]
BUILTIN_MODES = ["plain", "tensorscope", "tensorscope-text", "anomaly"]

# Targets: (id, description).  Evaluated in evaluate_targets().
MLP_MAX_RATIO = 1.3
GPT_MAX_RATIO = 1.10          # with -o; the terminal report (tensorscope-text) may cost up to GPT_TEXT_MAX_RATIO
GPT_TEXT_MAX_RATIO = 1.15
WIDE_MAX_RATIO = 1.3
PY_HEAVY_MAX_RATIO = 2.0
STARTUP_MAX_S = 0.3
RSS_MAX_RATIO = 1.1
# the per-event-bound workloads (long programs): see benchmarks/README.md
SMALL_MLP_MAX_RATIO = 1.3
GENERATED_MAX_RATIO = 2.0
SHORT_LIVED_MAX_RATIO = 1.5
EVENT_MAX_US = 5.0            # CPU time per event the wrappers saw (recorded + aggregated), small_mlp
REPORT_MAX_BYTES = 4 * 1024 * 1024  # many_params: the JSON report of ~20,000 tensors
# the time-ratio budgets the paired statistics test against (``paired``)
_LIMITS = {"mlp_train": MLP_MAX_RATIO, "gpt_train": GPT_MAX_RATIO, "wide_model": WIDE_MAX_RATIO,
           "python_heavy": PY_HEAVY_MAX_RATIO, "small_mlp": SMALL_MLP_MAX_RATIO, "generated_script": GENERATED_MAX_RATIO,
           "short_lived": SHORT_LIVED_MAX_RATIO}


@dataclass
class Mode:
    name: str
    argv: list[str]          # prefix; the workload path is appended; may contain "{report}"
    writes_report: bool


@dataclass
class Task:
    workload: str
    mode: str
    round: int               # -1.. for warm-up rounds, 0.. for measured rounds
    order: int               # submission order


@dataclass
class Result:
    task: Task
    wall_s: float
    maxrss_kb: int
    returncode: int | None
    timed_out: bool
    error: str | None = None
    events: dict | None = None
    report_bytes: int | None = None
    stderr_tail: str = ""
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- modes

def build_modes(python: str, selected: list[str], extra: list[str]) -> list[Mode]:
    builtin = {
        "plain": Mode("plain", [python], False),
        "tensorscope": Mode("tensorscope", [python, "-m", "tensorscope", "run", "-o", "{report}"], True),
        # the default terminal report, written to stdout (a file here: rich renders it at 80 columns)
        "tensorscope-text": Mode("tensorscope-text", [python, "-m", "tensorscope", "run"], False),
        "anomaly": Mode("anomaly", [python, str(BENCH_DIR / "anomaly.py")], False),
        # opt-in (--modes ...,tensorscope-no-retention): the same run without the retention walks (growth samples
        # at backward calls, Memory held at the end), to show what they cost beside `tensorscope`
        "tensorscope-no-retention": Mode("tensorscope-no-retention", ["env", "TENSORSCOPE_NO_RETENTION=1", python, "-m",
                                                                      "tensorscope", "run", "-o", "{report}"], True),
        # opt-in: the same run without the record of the program's lines that names every node's forward line
        # (Python 3.12+ only: see NOTE [Forward lines from line events]), to show what it costs beside `tensorscope`
        "tensorscope-no-lines": Mode("tensorscope-no-lines", ["env", "TENSORSCOPE_NO_LINES=1", python, "-m",
                                                              "tensorscope", "run", "-o", "{report}"], True),
        # not in the default set: explain (saved-tensor hooks and the non-finite checks, see
        # tensorscope/instrument/nonfinite.py and origin_walk.py) and run --check-values, beside anomaly mode's check_nan
        "tensorscope-explain": Mode("tensorscope-explain", [python, "-m", "tensorscope", "explain", "-o", "{report}"],
                                    True),
        "tensorscope-check-values": Mode("tensorscope-check-values",
                                         [python, "-m", "tensorscope", "run", "--check-values", "-o", "{report}"], True),
    }
    modes: list[Mode] = []
    for name in selected:
        if name not in builtin:
            raise SystemExit(f"run.py: unknown built-in mode {name!r} (known: {', '.join(builtin)})")
        modes.append(builtin[name])
    for spec in extra:
        name, sep, prefix = spec.partition("=")
        name = name.strip()
        if not sep or not name or not prefix.strip():
            raise SystemExit(f"run.py: --mode expects NAME=CMDPREFIX, got {spec!r}")
        if any(m.name == name for m in modes):
            raise SystemExit(f"run.py: duplicate mode name {name!r}")
        argv = shlex.split(prefix)
        if argv and argv[0] in ("python", "python3"):
            argv[0] = python
        argv = [a.replace("{python}", python) for a in argv]
        modes.append(Mode(name, argv, any("{report}" in a for a in argv)))
    return modes


# --------------------------------------------------------------------------- running

_LIVE: set[int] = set()        # process groups of children in flight (killed if we are interrupted)
_LIVE_LOCK = threading.Lock()


def _kill_live() -> None:
    with _LIVE_LOCK:
        pids = list(_LIVE)
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _on_sigterm(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt

def run_one(task: Task, mode: Mode, workload_path: Path, env: dict, timeout: float, tmpdir: Path) -> Result:
    report = tmpdir / f"{task.workload}.{task.mode}.{task.order}.report.json"
    argv = [a.replace("{report}", str(report)) for a in mode.argv] + [str(workload_path)]
    out_path = tmpdir / f"{task.order}.out"
    err_path = tmpdir / f"{task.order}.err"
    loop_path = tmpdir / f"{task.order}.loop.json"  # the workload's own timing of its loop (TS_BENCH_LOOP)
    env = dict(env, TS_BENCH_LOOP=str(loop_path))
    timed_out = threading.Event()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                cwd=str(REPO_ROOT), start_new_session=True)
        with _LIVE_LOCK:
            _LIVE.add(proc.pid)

        def _kill() -> None:
            timed_out.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, _kill)
        timer.daemon = True
        timer.start()
        try:
            while True:
                try:
                    _, status, rusage = os.wait4(proc.pid, 0)
                    break
                except InterruptedError:  # pragma: no cover - PEP 475 retries anyway
                    continue
        finally:
            t1 = time.perf_counter()
            timer.cancel()
            with _LIVE_LOCK:
                _LIVE.discard(proc.pid)
    rc = os.waitstatus_to_exitcode(status)
    proc.returncode = rc  # reaped by wait4; tell Popen so it does not try again
    res = Result(task, wall_s=t1 - t0, maxrss_kb=int(rusage.ru_maxrss), returncode=rc,
                 timed_out=timed_out.is_set())
    res.extra["argv"] = argv
    res.extra["user_s"] = rusage.ru_utime
    res.extra["sys_s"] = rusage.ru_stime
    try:
        res.stderr_tail = err_path.read_bytes()[-2000:].decode("utf-8", "replace")
    except OSError:
        pass
    if res.timed_out:
        res.error = f"timed out after {timeout:g} s"
    elif rc != 0:
        res.error = f"exit status {rc}"
    if mode.writes_report and not res.timed_out:
        try:
            res.report_bytes = report.stat().st_size
            with open(report, encoding="utf-8") as fh:
                doc = json.load(fh)
            summ = doc.get("events_summary") or {}
            res.events = {
                "recorded": summ.get("recorded"),
                "aggregated": summ.get("aggregated"),
                "sites": len(summ.get("sites") or []),
                "events_listed": len(doc.get("events") or []),
                "tensors": len(doc.get("tensors") or []),
            }
        except FileNotFoundError:
            res.error = (res.error + "; " if res.error else "") + "no report written"
        except (OSError, ValueError) as exc:
            res.error = (res.error + "; " if res.error else "") + f"bad report: {exc}"
    try:
        res.extra["loop"] = json.loads(loop_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    for p in (out_path, err_path, report, loop_path):
        try:
            p.unlink()
        except OSError:
            pass
    return res


def schedule(workloads: list[str], modes: list[Mode], repeats: int, warmup: int) -> list[Task]:
    tasks: list[Task] = []
    order = 0
    for w in workloads:
        for r in list(range(-warmup, 0)) + list(range(repeats)):
            # round-robin, the order reversed every other round (plain, tensorscope, anomaly, extra...; then
            # extra..., anomaly, tensorscope, plain): a drift of the machine inside a round hits each mode's
            # pair with plain from both sides
            for m in (modes if r % 2 == 0 else modes[::-1]):
                tasks.append(Task(w, m.name, r, order))
                order += 1
    return tasks


# --------------------------------------------------------------------------- machine info

def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info(python: str, env: dict) -> dict:
    info = {
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "platform": platform.platform(),
        "runner_python": sys.version.split()[0],
        "python_executable": python,
        "hostname": platform.node(),
    }
    try:
        info["loadavg_start"] = list(os.getloadavg())
    except OSError:
        pass
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            info["mem_total_mb"] = round(int(fh.readline().split()[1]) / 1024)
    except (OSError, ValueError, IndexError):
        pass
    probe = (
        "import json, sys, torch\n"
        "d = {'python': sys.version.split()[0], 'torch': torch.__version__,"
        " 'torch_threads': torch.get_num_threads()}\n"
        "try:\n"
        "    import tensorscope; d['tensorscope'] = getattr(tensorscope, '__version__', 'unknown')\n"
        "except Exception as e:\n"
        "    d['tensorscope'] = 'unavailable: %s' % type(e).__name__\n"
        "print(json.dumps(d))\n"
    )
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=env,
                             cwd=str(REPO_ROOT), timeout=120)
        info.update(json.loads(out.stdout.strip().splitlines()[-1]))
    except Exception as exc:  # noqa: BLE001 - informational only
        info["probe_error"] = repr(exc)
    return info


def compile_package(python: str, env: dict) -> str:
    """Byte-compile the tensorscope package the children import, as installing it does.

    pip writes the ``.pyc`` files of a package when it installs it; a source checkout under
    ``PYTHONDONTWRITEBYTECODE=1`` (set on some shared machines) never gets them, and every
    tensorscope process would then compile tensorscope's own sources again (about 0.09 s on the
    2-core box), a cost no installed copy has. The workload itself is compiled in every mode alike.
    """
    try:
        out = subprocess.run([python, "-m", "compileall", "-q", str(REPO_ROOT / "tensorscope")],
                             capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), timeout=300)
    except Exception as exc:  # noqa: BLE001 - the runs still work, only slower
        return f"not compiled: {exc!r}"
    return "compiled" if out.returncode == 0 else f"not compiled: exit {out.returncode}"


# --------------------------------------------------------------------------- statistics

def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _binom_cdf(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(0, k + 1)) / 2 ** n if k >= 0 else 0.0


def median_ci(xs: list[float], level: float = 0.95) -> tuple[float, float, float] | None:
    """A distribution-free confidence interval of the median of ``xs``: (low, high, coverage).

    The order statistics x_(k) and x_(n+1-k) for the largest k with P(B <= k - 1) <= (1 - level) / 2,
    B ~ Binomial(n, 1/2): the median lies below x_(k) only if fewer than k of the n values are below it,
    whatever their distribution. ``coverage`` is the interval's exact level (>= ``level``). None when n
    is too small for the level (n < 6 at 95%)."""
    n = len(xs)
    ys = sorted(xs)
    k = 0
    while k + 1 <= n // 2 and _binom_cdf(k, n) <= (1 - level) / 2:
        k += 1
    if k == 0:
        return None
    return ys[k - 1], ys[n - k], 1 - 2 * _binom_cdf(k - 1, n)


def paired(ratios: list[float], limit: float | None = None) -> dict | None:
    """What per-pair ratios (mode / plain in the same round) say: their median, its 95% interval, and
    against ``limit`` the pairs above it and the one-sided sign test's p-values both ways."""
    if not ratios:
        return None
    out = {"n": len(ratios), "median": statistics.median(ratios), "ci95": None, "coverage": None,
           "min": min(ratios), "max": max(ratios)}
    ci = median_ci(ratios)
    if ci is not None:
        out["ci95"], out["coverage"] = [ci[0], ci[1]], ci[2]
    if limit is not None:
        above = sum(1 for x in ratios if x > limit)
        n = len(ratios)
        out["limit"] = limit
        out["above_limit"] = above
        # H0: the median ratio is at the limit. Few pairs above it: the median is below (p_below small);
        # few pairs at or below it: the median is above (p_above small)
        out["p_below"] = _binom_cdf(above, n)
        out["p_above"] = _binom_cdf(n - above, n)
        out["verdict"] = ("N/A" if ci is None else "PASS" if ci[1] <= limit else "FAIL" if ci[0] > limit
                          else "UNDECIDED")
    return out


def _loop_cpu(r: Result) -> float | None:
    loop = r.extra.get("loop")
    return loop.get("loop_cpu_s") if isinstance(loop, dict) else None


def summarize(results: list[Result], workloads: list[str], modes: list[Mode]) -> dict:
    measured = [r for r in results if r.task.round >= 0]
    by: dict[tuple[str, str, int], Result] = {(r.task.workload, r.task.mode, r.task.round): r for r in measured}
    rounds = sorted({r.task.round for r in measured})
    summary: dict[str, dict[str, dict]] = {}
    for w in workloads:
        summary[w] = {}
        for m in modes:
            rs = [by[(w, m.name, k)] for k in rounds if (w, m.name, k) in by]
            ok = [r for r in rs if r.error is None]
            times = [r.wall_s for r in ok]
            rss = [r.maxrss_kb / 1024 for r in ok]
            cpu = [r.extra.get("user_s", 0.0) + r.extra.get("sys_s", 0.0) for r in ok]
            t_ratios, m_ratios, c_ratios, l_ratios = [], [], [], []
            for k in rounds:
                a, p = by.get((w, m.name, k)), by.get((w, "plain", k))
                if a and p and a.error is None and p.error is None and p.wall_s > 0 and p.maxrss_kb > 0:
                    t_ratios.append(a.wall_s / p.wall_s)
                    m_ratios.append(a.maxrss_kb / p.maxrss_kb)
                    pc = p.extra.get("user_s", 0.0) + p.extra.get("sys_s", 0.0)
                    if pc > 0:
                        c_ratios.append((a.extra.get("user_s", 0.0) + a.extra.get("sys_s", 0.0)) / pc)
                    la, lp = _loop_cpu(a), _loop_cpu(p)
                    if la is not None and lp:
                        l_ratios.append(la / lp)
            ev = next((r.events for r in reversed(ok) if r.events is not None), None)
            rep = next((r.report_bytes for r in reversed(ok) if r.report_bytes is not None), None)
            summary[w][m.name] = {
                "runs": len(rs),
                "ok": len(ok),
                "errors": sorted({r.error for r in rs if r.error}),
                "wall_s": times,
                "median_wall_s": _median(times),
                "min_wall_s": min(times) if times else None,
                "ratio_to_plain": _median(t_ratios),
                "peak_rss_mb": rss,
                "median_peak_rss_mb": _median(rss),
                "rss_ratio_to_plain": _median(m_ratios),
                "median_user_s": _median([r.extra.get("user_s", 0.0) for r in ok]),
                "median_sys_s": _median([r.extra.get("sys_s", 0.0) for r in ok]),
                "cpu_s": cpu,
                "median_cpu_s": _median(cpu),
                "cpu_ratio_to_plain": _median(c_ratios),
                "loop_cpu_s": [x for x in (_loop_cpu(r) for r in ok) if x is not None],
                # paired rounds: each mode's run against plain's of the same round (see benchmarks/README.md, Method)
                "paired": None if m.name == "plain" else {
                    "wall": paired(t_ratios, _LIMITS.get(w)), "cpu": paired(c_ratios, _LIMITS.get(w)),
                    "loop_cpu": paired(l_ratios, _LIMITS.get(w))},
                "events": ev,
                "us_per_event": _us_per_event(ok, by, w, rounds, ev),
                "report_bytes": rep,
                "argv": rs[0].extra.get("argv") if rs else None,
            }
    return summary


def _us_per_event(ok: list, by: dict, w: str, rounds: list, ev: dict | None) -> float | None:
    """CPU microseconds the mode added per event its wrappers saw (recorded + aggregated): the median
    over rounds of (CPU of the mode - CPU of plain in the same round) / events."""
    if not ev or not ok:
        return None
    n = (ev.get("recorded") or 0) + (ev.get("aggregated") or 0)
    if n <= 0:
        return None
    per = []
    for r in ok:
        p = by.get((w, "plain", r.task.round))
        if p is not None and p.error is None:
            extra = (r.extra.get("user_s", 0.0) + r.extra.get("sys_s", 0.0)
                     - p.extra.get("user_s", 0.0) - p.extra.get("sys_s", 0.0))
            per.append(extra / n * 1e6)
    return _median(per)


def evaluate_targets(summary: dict, target_modes: list[str]) -> list[dict]:
    checks: list[dict] = []

    def add(mode: str, name: str, value, limit: str, ok: bool | None, note: str = "") -> None:
        checks.append({"mode": mode, "target": name, "value": value, "limit": limit,
                       "status": "N/A" if ok is None else ("PASS" if ok else "FAIL"), "note": note})

    def get(w: str, m: str, key: str):
        return summary.get(w, {}).get(m, {}).get(key)

    for m in target_modes:
        def cpu_note(w: str) -> str:
            c = get(w, m, "cpu_ratio_to_plain")
            return "" if c is None else f"CPU-time ratio {c:.2f}x"

        if "mlp_train" in summary:
            r = get("mlp_train", m, "ratio_to_plain")
            add(m, "mlp_train time ratio", r, f"<= {MLP_MAX_RATIO}", None if r is None else r <= MLP_MAX_RATIO,
                cpu_note("mlp_train"))
            t, a = get("mlp_train", m, "median_wall_s"), get("mlp_train", "anomaly", "median_wall_s")
            add(m, "mlp_train below anomaly", None if t is None or a is None else t - a,
                "median(mode) - median(anomaly) < 0 s", None if t is None or a is None else t < a)
        if "gpt_train" in summary:
            limit = GPT_TEXT_MAX_RATIO if m == "tensorscope-text" else GPT_MAX_RATIO
            r = get("gpt_train", m, "ratio_to_plain")
            add(m, "gpt_train time ratio", r, f"<= {limit}", None if r is None else r <= limit, cpu_note("gpt_train"))
            pr = get("gpt_train", m, "paired") or {}
            for key, what in (("cpu", "CPU"), ("loop_cpu", "loop CPU, in process")):
                st = pr.get(key)
                if st is None:
                    continue
                lo_hi = st.get("ci95")
                note = (f"{st['n']} pairs, 95% CI {lo_hi[0]:.3f}-{lo_hi[1]:.3f}x, {st['above_limit']} above "
                        f"{limit}" if lo_hi else f"{st['n']} pairs: too few for a 95% interval (6 at least)")
                # the verdict of the interval against the limit that applies to this mode
                v = "N/A" if not lo_hi else "PASS" if lo_hi[1] <= limit else "FAIL" if lo_hi[0] > limit else "UNDECIDED"
                checks.append({"mode": m, "target": f"gpt_train paired {what} ratio, median", "value": st["median"],
                               "limit": f"<= {limit}: 95% CI below", "status": v, "note": note})
            t, a = get("gpt_train", m, "median_wall_s"), get("gpt_train", "anomaly", "median_wall_s")
            add(m, "gpt_train below anomaly", None if t is None or a is None else t - a,
                "median(mode) - median(anomaly) < 0 s", None if t is None or a is None else t < a)
        if "wide_model" in summary:
            r = get("wide_model", m, "ratio_to_plain")
            add(m, "wide_model time ratio", r, f"<= {WIDE_MAX_RATIO}", None if r is None else r <= WIDE_MAX_RATIO,
                cpu_note("wide_model"))
        if "python_heavy" in summary:
            r = get("python_heavy", m, "ratio_to_plain")
            add(m, "python_heavy time ratio", r, f"<= {PY_HEAVY_MAX_RATIO}",
                None if r is None else r <= PY_HEAVY_MAX_RATIO, cpu_note("python_heavy"))
        if "seed_snippet" in summary:
            t, p = get("seed_snippet", m, "median_wall_s"), get("seed_snippet", "plain", "median_wall_s")
            d = None if t is None or p is None else t - p
            tc, pc = get("seed_snippet", m, "median_cpu_s"), get("seed_snippet", "plain", "median_cpu_s")
            note = "" if tc is None or pc is None else f"CPU-time difference {tc - pc:.3f} s"
            add(m, "start-up overhead (seed_snippet)", d, f"<= {STARTUP_MAX_S} s",
                None if d is None else d <= STARTUP_MAX_S, note)
        for w, limit in (("small_mlp", SMALL_MLP_MAX_RATIO), ("generated_script", GENERATED_MAX_RATIO),
                         ("short_lived", SHORT_LIVED_MAX_RATIO)):
            if w in summary:
                r = get(w, m, "ratio_to_plain")
                add(m, f"{w} time ratio", r, f"<= {limit}", None if r is None else r <= limit, cpu_note(w))
        if "small_mlp" in summary:
            u = get("small_mlp", m, "us_per_event")
            add(m, "small_mlp CPU per event (us)", u, f"<= {EVENT_MAX_US}", None if u is None else u <= EVENT_MAX_US)
        for w in ("many_params", "many_views"):  # 20,000 tensors each
            if w in summary:
                b = get(w, m, "report_bytes")
                add(m, f"{w} report size (bytes)", b, f"< {REPORT_MAX_BYTES}", None if b is None else b < REPORT_MAX_BYTES)
        for w in summary:
            r = get(w, m, "rss_ratio_to_plain")
            add(m, f"{w} peak RSS ratio", r, f"<= {RSS_MAX_RATIO}", None if r is None else r <= RSS_MAX_RATIO)
        if "many_events" in summary:
            r = get("many_events", m, "rss_ratio_to_plain")
            ev = get("many_events", m, "events") or {}
            note = f"recorded={ev.get('recorded')} aggregated={ev.get('aggregated')}" if ev else ""
            add(m, "event log bounded (many_events RSS ratio)", r, f"<= {RSS_MAX_RATIO}",
                None if r is None else r <= RSS_MAX_RATIO, note)
    return checks


# --------------------------------------------------------------------------- output

def _f(x, nd=3, suffix="") -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{nd}f}{suffix}"
    return f"{x}{suffix}"


def markdown(doc: dict) -> str:
    lines = []
    mi = doc["machine"]
    cfg = doc["config"]
    lines.append(f"## tensorscope benchmark ({doc['timestamp']})")
    lines.append("")
    lines.append(f"- machine: {mi.get('cpu_model')}, {mi.get('cpus_available')}/{mi.get('cpu_count')} cores, "
                 f"{mi.get('mem_total_mb', '?')} MB RAM; python {mi.get('python')}, torch {mi.get('torch')} "
                 f"({mi.get('torch_threads')} threads), tensorscope {mi.get('tensorscope')}")
    lines.append(f"- scale {cfg['scale']}, repeats {cfg['repeats']}, warm-up rounds {cfg['warmup']}, "
                 f"jobs {cfg['jobs']}, timeout {cfg['timeout']} s, torch threads in children "
                 f"{cfg.get('torch_threads') or 'default'}; tensorscope's bytecode {mi.get('bytecode', '?')}")
    la0, la1 = mi.get("loadavg_start"), mi.get("loadavg_end")
    if la0 and la1:
        busy = max(la0[0], la1[0]) > (mi.get("cpus_available") or 1)
        lines.append(f"- load average (1 min) at start {la0[0]:.2f}, at end {la1[0]:.2f}"
                     + (" -- the machine was busy with other work: wall times are noisy, compare CPU s"
                        if busy else ""))
    lines.append("")
    lines.append("| workload | mode | median wall s | ratio to plain | peak RSS MB | RSS ratio | CPU s (user+sys) | CPU ratio "
                 "| events recorded / aggregated | CPU us / event | report KB | ok |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for w, modes in doc["summary"].items():
        for m, s in modes.items():
            ev = s.get("events")
            evs = f"{ev.get('recorded')} / {ev.get('aggregated')}" if ev else "-"
            rep = _f(s["report_bytes"] / 1024, 1) if s.get("report_bytes") is not None else "-"
            okcol = f"{s['ok']}/{s['runs']}" + (f" ({'; '.join(s['errors'])})" if s["errors"] else "")
            lines.append(f"| {w} | {m} | {_f(s['median_wall_s'])} | {_f(s['ratio_to_plain'], 2, 'x')} | "
                         f"{_f(s['median_peak_rss_mb'], 1)} | {_f(s['rss_ratio_to_plain'], 3, 'x')} | "
                         f"{_f(s['median_cpu_s'], 2)} | {_f(s['cpu_ratio_to_plain'], 2, 'x')} | {evs} | "
                         f"{_f(s.get('us_per_event'), 2)} | {rep} | {okcol} |")
    prs = [(w, m, k, s["paired"][k]) for w, modes in doc["summary"].items() for m, s in modes.items()
           if s.get("paired") for k in ("wall", "cpu", "loop_cpu") if s["paired"].get(k)]
    if prs:
        lines.append("")
        lines.append("Paired rounds (each run / plain's in the same round): median, its distribution-free 95% interval, "
                     "the range, and the pairs above the budget")
        lines.append("")
        lines.append("| workload | mode | ratio of | pairs | median | 95% CI | min - max | above budget |")
        lines.append("|---|---|---|---:|---:|---|---|---|")
        for w, m, k, st in prs:
            ci = f"{st['ci95'][0]:.3f} - {st['ci95'][1]:.3f}x" if st.get("ci95") else "-"
            above = (f"{st['above_limit']} of {st['n']} > {st['limit']} ({st['verdict']})"
                     if st.get("limit") is not None else "-")
            lines.append(f"| {w} | {m} | {k} | {st['n']} | {st['median']:.3f}x | {ci} | "
                         f"{st['min']:.3f} - {st['max']:.3f}x | {above} |")
    if doc["targets"]:
        lines.append("")
        lines.append("| target | mode | value | limit | status |")
        lines.append("|---|---|---:|---|---|")
        for c in doc["targets"]:
            v = c["value"]
            vs = _f(v, 3) if isinstance(v, float) else _f(v)
            note = f" ({c['note']})" if c.get("note") else ""
            lines.append(f"| {c['target']}{note} | {c['mode']} | {vs} | {c['limit']} | {c['status']} |")
        if doc["config"]["scale"] != 1.0:
            lines.append("")
            lines.append("_targets are defined for --scale 1; at other scales they are indicative only._")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="benchmarks/run.py",
        description="Whole-process benchmark of tensorscope against plain python and anomaly mode.",
        epilog="See the module docstring / benchmarks/README.md for details.")
    ap.add_argument("--scale", type=float, default=1.0, help="workload size factor (env TS_BENCH_SCALE), default 1.0")
    ap.add_argument("--repeats", type=int, default=5, help="measured rounds per workload (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="discarded warm-up rounds per workload (default 1)")
    ap.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                    help="comma-separated workload names (files in benchmarks/workloads/, .py optional)")
    ap.add_argument("--modes", default=",".join(BUILTIN_MODES),
                    help="comma-separated built-in modes to run (default plain,tensorscope,anomaly)")
    ap.add_argument("--mode", action="append", default=[], metavar="NAME=CMDPREFIX",
                    help="extra mode; workload path appended; {report}/{python} substituted (repeatable)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="processes run side by side (default 1; >1 adds noise on small machines)")
    ap.add_argument("--timeout", type=float, default=900.0, help="per-process time limit in s (default 900)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help=f"JSON results file (default {DEFAULT_OUT.relative_to(REPO_ROOT)})")
    ap.add_argument("--python", default=sys.executable, help="interpreter for the children (default: this one)")
    ap.add_argument("--targets-for", default=None,
                    help="modes whose targets are checked (default: tensorscope and every --mode)")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="set OMP_NUM_THREADS/MKL_NUM_THREADS for the children (default: torch's default)")
    ap.add_argument("--quiet", action="store_true", help="no per-run progress on stderr")
    a = ap.parse_args(argv)
    if a.repeats < 1 or a.warmup < 0 or a.jobs < 1 or a.timeout <= 0 or a.scale <= 0:
        ap.error("--repeats and --jobs must be >= 1, --warmup >= 0, --timeout and --scale > 0")
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workloads = [w.strip().removesuffix(".py") for w in args.workloads.split(",") if w.strip()]
    paths = {}
    for w in workloads:
        p = WORKLOAD_DIR / f"{w}.py"
        if not p.is_file():
            known = ", ".join(sorted(q.stem for q in WORKLOAD_DIR.glob("*.py") if not q.stem.startswith("_")))
            print(f"run.py: unknown workload {w!r} (known: {known})", file=sys.stderr)
            return 2
        paths[w] = p
    selected = [m.strip() for m in args.modes.split(",") if m.strip()]
    modes = build_modes(args.python, selected, args.mode)
    mode_by_name = {m.name: m for m in modes}
    if args.targets_for is not None:
        target_modes = [m.strip() for m in args.targets_for.split(",") if m.strip() in mode_by_name]
    else:
        target_modes = [m.name for m in modes if m.name not in ("plain", "anomaly")]

    env = dict(os.environ)
    env["TS_BENCH_SCALE"] = repr(args.scale)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONHASHSEED", "0")
    if args.torch_threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(args.torch_threads)

    info = machine_info(args.python, env)
    info["bytecode"] = compile_package(args.python, env)
    tasks = schedule(workloads, modes, args.repeats, args.warmup)
    tmpdir = Path(tempfile.mkdtemp(prefix="ts-bench-"))
    results: list[Result] = []
    lock = threading.Lock()
    t_start = time.perf_counter()
    signal.signal(signal.SIGTERM, _on_sigterm)
    pool = cf.ThreadPoolExecutor(max_workers=args.jobs)
    try:
        futs = [pool.submit(run_one, t, mode_by_name[t.mode], paths[t.workload], env, args.timeout, tmpdir)
                for t in tasks]
        for fut in cf.as_completed(futs):
            res = fut.result()
            with lock:
                results.append(res)
                if not args.quiet:
                    t = res.task
                    tag = "warm-up" if t.round < 0 else f"round {t.round + 1}/{args.repeats}"
                    status = "ok" if res.error is None else f"ERROR {res.error}"
                    print(f"[{len(results):3d}/{len(tasks)}] {t.workload:13s} {t.mode:12s} {tag:12s} "
                          f"{res.wall_s:8.3f} s {res.maxrss_kb / 1024:8.1f} MB  {status}",
                          file=sys.stderr, flush=True)
                    if res.error and res.stderr_tail:
                        print("    stderr tail: " + res.stderr_tail.strip().replace("\n", "\n    "),
                              file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        _kill_live()
        print("run.py: interrupted; in-flight runs killed, no results written", file=sys.stderr)
        return 130
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        _kill_live()
        shutil.rmtree(tmpdir, ignore_errors=True)
    results.sort(key=lambda r: r.task.order)

    try:
        info["loadavg_end"] = list(os.getloadavg())
    except OSError:
        pass
    summary = summarize(results, workloads, modes)
    doc = {
        "schema": "tensorscope-benchmark/1",
        "timestamp": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "total_s": round(time.perf_counter() - t_start, 3),
        "machine": info,
        "config": {"scale": args.scale, "repeats": args.repeats, "warmup": args.warmup, "jobs": args.jobs,
                   "timeout": args.timeout, "torch_threads": args.torch_threads, "workloads": workloads,
                   "modes": {m.name: m.argv for m in modes}, "target_modes": target_modes},
        "summary": summary,
        "targets": evaluate_targets(summary, target_modes),
        "runs": [{"workload": r.task.workload, "mode": r.task.mode, "round": r.task.round,
                  "warmup": r.task.round < 0, "wall_s": r.wall_s, "peak_rss_mb": r.maxrss_kb / 1024,
                  "user_s": r.extra.get("user_s"), "sys_s": r.extra.get("sys_s"),
                  "returncode": r.returncode, "timed_out": r.timed_out, "error": r.error,
                  "events": r.events, "report_bytes": r.report_bytes,
                  "stderr_tail": r.stderr_tail if r.error else None} for r in results],
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(markdown(doc))
    print(f"\nresults written to {out}", file=sys.stderr)
    return 0 if all(r.error is None for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
