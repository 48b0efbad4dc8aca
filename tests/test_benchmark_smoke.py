"""Smoke test for the benchmark harness (benchmarks/run.py).

Runs every workload plain and under tensorscope, and a fixed sample of them under the
other built-in modes (every pair under TENSORSCOPE_CORPUS_FULL=1), once, tiny (--scale 0.01,
no warm-up, two processes side by side, one torch thread each), and checks that
the harness exits 0 and writes a well-formed JSON results file.  It
deliberately asserts NO timing or memory targets: the benchmark measures, it
does not test.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from _sample import ci_sample

REPO = Path(__file__).resolve().parent.parent
RUN = REPO / "benchmarks" / "run.py"
WORKLOADS = ["seed_snippet", "mlp_train", "python_heavy", "memory_churn", "many_events", "gpt_train", "wide_model"]
MODES = ["plain", "tensorscope", "tensorscope-text", "anomaly"]
# Every workload runs plain and under `tensorscope` (the mode every figure is read from). The other modes
# run on a fixed sample of the workloads (tests/_sample.py; all of them under TENSORSCOPE_CORPUS_FULL=1):
# they are the same harness code path with another command prefix.
OTHER_MODES = MODES[2:]
OTHER_WORKLOADS = ci_sample(WORKLOADS, 2, name=str)
# Two harness calls (the harness runs every workload in every mode it is given): the sampled workloads in
# all four modes, the others plain and under `tensorscope`. Each (workload, mode) runs once, so no plain
# run is repeated only to give a second call its ratios.
CALLS = [(workloads, modes) for workloads, modes in
         ((OTHER_WORKLOADS, MODES), ([w for w in WORKLOADS if w not in OTHER_WORKLOADS], MODES[:2])) if workloads]


pytestmark = pytest.mark.slow  # ~25 s on an idle 2-core machine (18 short python processes)


def _harness(out, workloads, modes):
    return subprocess.run(
        [sys.executable, str(RUN), "--scale", "0.01", "--repeats", "1", "--warmup", "0", "--jobs", "2",
         "--timeout", "900", "--torch-threads", "1", "--workloads", ",".join(workloads),
         "--modes", ",".join(modes), "--out", str(out)],
        cwd=str(REPO), capture_output=True, text=True,
        timeout=900 * len(workloads),  # guards a hang, not speed: each process has its own 900 s above
    )


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """[(workloads, modes, process, results file)] of each harness call."""
    folder = tmp_path_factory.mktemp("bench")
    calls = []
    for i, (workloads, modes) in enumerate(CALLS):
        out = folder / f"results{i}.json"
        calls.append((workloads, modes, _harness(out, workloads, modes), out))
    return calls


def test_harness_exits_zero(bench):
    for _, _, proc, out in bench:
        assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
        assert out.is_file()
        assert "| workload | mode |" in proc.stdout  # the Markdown table


def test_every_workload_and_mode_runs():
    ran = {(w, m) for workloads, modes in CALLS for w in workloads for m in modes}
    assert {w for w, _ in ran} == set(WORKLOADS) and {m for _, m in ran} == set(MODES)


def test_results_structure(bench):
    for workloads, modes, proc, out in bench:
        assert out.is_file(), proc.stderr[-4000:]
        doc = json.loads(out.read_text())
        for key in ("schema", "timestamp", "machine", "config", "summary", "targets", "runs"):
            assert key in doc
        for key in ("cpu_model", "cpu_count", "python", "torch"):
            assert key in doc["machine"]
        assert doc["config"]["scale"] == 0.01
        assert set(doc["summary"]) == set(workloads)
        for w in workloads:
            assert set(doc["summary"][w]) == set(modes), w
            for m in modes:
                s = doc["summary"][w][m]
                assert s["runs"] == 1 and s["ok"] == 1 and not s["errors"], (w, m, s["errors"])
                assert s["median_wall_s"] > 0, (w, m)
                assert all(t > 0 for t in s["wall_s"]), (w, m)
                assert s["median_peak_rss_mb"] > 0, (w, m)
                assert s["ratio_to_plain"] is not None and s["ratio_to_plain"] > 0, (w, m)
                assert s["rss_ratio_to_plain"] is not None and s["rss_ratio_to_plain"] > 0, (w, m)
            if "tensorscope" in modes:
                ev = doc["summary"][w]["tensorscope"]["events"]
                assert ev is not None, w  # the report's events_summary was read back
                assert set(ev) >= {"recorded", "aggregated"}
        runs = doc["runs"]
        assert len(runs) == len(workloads) * len(modes)
        assert all(r["returncode"] == 0 and not r["timed_out"] and r["wall_s"] > 0 for r in runs)
        # targets are reported (PASS/FAIL/N/A) but never asserted here
        assert doc["targets"] and all(c["status"] in ("PASS", "FAIL", "N/A", "UNDECIDED") for c in doc["targets"])
