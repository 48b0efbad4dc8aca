"""The peer-suite harness (benchmarks/peer.py) on a tiny test file of our own.

One run of the real harness is shared by the asserts: it must record every kind of
outcome on both sides, survive a segfault (record it as crash, resume with the next
test in a fresh process), report the one test that differs on purpose, and on
--resume run nothing again.  Expected values come from the sample file itself.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from _cli import REPO, _env

HARNESS = REPO / "benchmarks" / "peer.py"
SAMPLE = REPO / "tests" / "programs" / "peer" / "peer_sample.py"
PREFIX = "peer_sample.py::Sample::"

pytestmark = pytest.mark.slow


def _harness(out, *extra):
    return subprocess.run([sys.executable, str(HARNESS), str(SAMPLE), "--out", str(out), *extra],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("peer")
    proc = _harness(out)
    results = json.loads((out / "results.json").read_text())
    (summary,) = results["files"].values()
    rows = {r["test"].removeprefix(PREFIX): r for r in summary["results"]}
    return out, proc, summary, rows


def test_summary_counts_and_exit_status(run):
    _, proc, summary, rows = run
    assert set(rows) == {"test_a_passes", "test_b_prints", "test_c_skipped", "test_d_segfaults",
                         "test_e_fails", "test_f_after_crash", "test_g_sees_the_tool"}
    assert (summary["tests"], summary["identical"], summary["different"], summary["crash"]) == (7, 6, 1, 0)
    assert proc.returncode == 1, proc.stderr
    assert "peer_sample.py: 7 tests, 6 identical, 1 different (0 crash)" in proc.stdout


def test_each_outcome_is_recorded_on_both_sides(run):
    _, _, _, rows = run
    for side in ("tensorscope", "python"):
        outcome = {name: row[side]["outcome"] for name, row in rows.items()}
        assert outcome == {"test_a_passes": "passed", "test_b_prints": "passed", "test_c_skipped": "skipped",
                           "test_d_segfaults": "crash", "test_e_fails": "failed",
                           "test_f_after_crash": "passed", "test_g_sees_the_tool": "passed"}
        assert "SIGSEGV" in rows["test_d_segfaults"][side]["message"]
        assert rows["test_b_prints"][side]["stdout"] == "view shares storage: True\n"
        assert "skipped on purpose" in rows["test_c_skipped"][side]["message"]
        assert "AssertionError" in rows["test_e_fails"][side]["message"]


def test_the_crash_is_followed_by_a_fresh_process(run):
    _, _, _, rows = run
    for side in ("tensorscope", "python"):
        assert rows["test_f_after_crash"][side]["segment"] != rows["test_d_segfaults"][side]["segment"]
        assert rows["test_c_skipped"][side]["segment"] == rows["test_d_segfaults"][side]["segment"]


def test_the_difference_is_reported_with_its_first_line(run):
    _, proc, _, rows = run
    row = rows["test_g_sees_the_tool"]
    assert row["verdict"] == "different"
    assert row["tensorscope"]["stdout"] == "tensorscope loaded: True\n"
    assert row["python"]["stdout"] == "tensorscope loaded: False\n"
    assert row["first_difference"] == ("stdout line 1: tensorscope 'tensorscope loaded: True' "
                                       "| python 'tensorscope loaded: False'")
    assert f"different {PREFIX}test_g_sees_the_tool" in " ".join(proc.stdout.split())
    assert all(r["verdict"] == "identical" for name, r in rows.items() if name != "test_g_sees_the_tool")


def test_resume_runs_nothing_again(run):
    out, _, _, _ = run
    segments = sorted(p.name for p in (out / "peer_sample").glob("*.raw.jsonl"))
    proc = _harness(out, "--resume", "-k", "not test_g")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in (out / "peer_sample").glob("*.raw.jsonl")) == segments
    (again,) = json.loads((out / "results.json").read_text())["files"].values()
    assert [r["test"].removeprefix(PREFIX) for r in again["results"]] == [
        "test_a_passes", "test_b_prints", "test_c_skipped", "test_d_segfaults", "test_e_fails", "test_f_after_crash"]
    assert {r["verdict"] for r in again["results"]} == {"identical"}


def test_explain_runs_the_tensorscope_side_under_explain(tmp_path):
    # Two tests only (one process per side): the explain side's report says which command wrote it.
    proc = _harness(tmp_path, "--explain", "-k", "test_a_passes or test_g_sees_the_tool")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["command"] == "explain"
    (summary,) = results["files"].values()
    verdicts = {r["test"].removeprefix(PREFIX): r["verdict"] for r in summary["results"]}
    assert verdicts == {"test_a_passes": "identical", "test_g_sees_the_tool": "different"}
    reports = sorted((tmp_path / "peer_sample").glob("ts-*.report.json"))
    assert reports and all(json.loads(p.read_text())["command"] == "explain" for p in reports)



def _profiled_table(mm: int, add: int, sort_by, mm_calls=1, add_calls=1, mul=0):
    """torch.profiler's table of mm of mm x mm, add of `add` elements (and mul of `mul`), called as often as
    asked: the same ops and counts whatever the sizes; which one took longer is the sizes'."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    a, b, c = torch.ones(mm, mm), torch.ones(add), torch.ones(mul)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(mm_calls):
            torch.mm(a, a)
        for _ in range(add_calls):
            torch.add(b, b)
        if mul:
            torch.mul(c, c)
    return prof.key_averages().table(sort_by=sort_by)


def _swap(table: str, x: str, y: str) -> str:
    lines = table.splitlines()
    i, j = (next(k for k, line in enumerate(lines) if line.split()[:1] == [op]) for op in (x, y))
    lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def test_time_sorted_profiler_tables_are_compared_by_their_rows():
    """The rows of a table sorted by measured time come in the clock's order: two runs that list the same
    rows in another order are the same; a table in another order (by count) still differs by its order."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("peer_under_test", HARNESS)
    peer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peer)

    def record(text):
        return {"outcome": "passed", "message": "", "stdout": text}

    slow_mm = _profiled_table(400, 4, "self_cpu_time_total")
    slow_add = _profiled_table(4, 4_000_000, "self_cpu_time_total")
    names = [[line.split()[0] for line in t.splitlines() if line.strip().startswith("aten::")]
             for t in (slow_mm, slow_add)]
    assert names[0] != names[1] and sorted(names[0]) == sorted(names[1]), names  # torch put them in another order
    assert peer.first_difference(record(slow_mm), record(slow_add)) is None
    other = slow_mm.replace("aten::add ", "aten::sub ")
    assert peer.first_difference(record(slow_mm), record(other)) is not None  # a row that differs still differs
    # by count: add x3 (microseconds), mm x2 (milliseconds), mul x1 (between): in no column from the largest down
    by_count = _profiled_table(400, 4, "count", mm_calls=2, add_calls=3, mul=4_000_000)
    assert peer.first_difference(record(by_count), record(by_count)) is None
    assert peer.first_difference(record(by_count), record(_swap(by_count, "aten::add", "aten::mul"))) is not None
