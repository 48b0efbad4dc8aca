"""Profile the tensorscope mode of a benchmark workload with cProfile.

    python benchmarks/profile_ts.py [WORKLOAD ...] [--scale S] [--top N] [--prof-dir DIR]

For each workload (default: mlp_train python_heavy) runs

    python -m cProfile -o DIR/WORKLOAD.prof -m tensorscope run -o DIR/WORKLOAD.report.json W

(TS_BENCH_SCALE=S in the environment), then prints the top N functions by
tottime over the whole process, and the top N among functions defined under
tensorscope/ (by tottime and by cumtime) -- the list to optimise from.  cProfile
itself slows down Python-level calls several-fold, so look at the proportions, not
at the absolute times.
"""
from __future__ import annotations

import argparse
import io
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
PKG_DIR = str(REPO_ROOT / "tensorscope") + os.sep


def _rows(stats: pstats.Stats, key: str, only_pkg: bool, top: int):
    rows = []
    for (file, line, func), (cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if only_pkg and not file.startswith(PKG_DIR):
            continue
        rows.append((file, line, func, cc, nc, tt, ct))
    idx = 5 if key == "tottime" else 6
    rows.sort(key=lambda r: r[idx], reverse=True)
    return rows[:top]


def _fmt(rows, total: float) -> str:
    out = io.StringIO()
    out.write(f"{'ncalls':>10} {'tottime':>9} {'tot%':>6} {'cumtime':>9}  function\n")
    for file, line, func, cc, nc, tt, ct in rows:
        short = os.path.relpath(file, REPO_ROOT) if file.startswith(str(REPO_ROOT)) else file
        calls = f"{nc}" if nc == cc else f"{nc}/{cc}"
        pct = 100.0 * tt / total if total else 0.0
        out.write(f"{calls:>10} {tt:9.3f} {pct:5.1f}% {ct:9.3f}  {short}:{line}({func})\n")
    return out.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/profile_ts.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("workloads", nargs="*", default=["mlp_train", "python_heavy"])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--prof-dir", default="/tmp")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    env = dict(os.environ, TS_BENCH_SCALE=repr(args.scale))
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    Path(args.prof_dir).mkdir(parents=True, exist_ok=True)
    rc_all = 0
    for w in args.workloads:
        w = w.removesuffix(".py")
        wl = BENCH_DIR / "workloads" / f"{w}.py"
        prof = Path(args.prof_dir) / f"{w}.prof"
        report = Path(args.prof_dir) / f"{w}.report.json"
        cmd = [args.python, "-m", "cProfile", "-o", str(prof), "-m", "tensorscope", "run", "-o", str(report), str(wl)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=str(REPO_ROOT), env=env, stdout=subprocess.DEVNULL)
        dt = time.perf_counter() - t0
        print(f"# {w}: {' '.join(cmd)}\n# exit {proc.returncode}, {dt:.2f} s under cProfile")
        if proc.returncode != 0 or not prof.is_file():
            rc_all = 1
            continue
        st = pstats.Stats(str(prof))
        total = st.total_tt  # type: ignore[attr-defined]
        pkg_tt = sum(v[2] for k, v in st.stats.items() if k[0].startswith(PKG_DIR))  # type: ignore[attr-defined]
        print(f"# total tottime {total:.3f} s; in tensorscope/ {pkg_tt:.3f} s ({100 * pkg_tt / total:.1f}%)\n")
        print(f"## {w}: top {args.top} by tottime (whole process)")
        print(_fmt(_rows(st, "tottime", False, args.top), total))
        print(f"## {w}: top {args.top} under tensorscope/ by tottime")
        print(_fmt(_rows(st, "tottime", True, args.top), total))
        print(f"## {w}: top {args.top} under tensorscope/ by cumtime")
        print(_fmt(_rows(st, "cumtime", True, args.top), total))
    return rc_all


if __name__ == "__main__":
    sys.exit(main())
