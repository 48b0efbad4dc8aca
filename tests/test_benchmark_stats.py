"""The paired statistics of benchmarks/run.py (see benchmarks/README.md, Method): the distribution-free
interval of a median and the verdict it gives against a budget. Pure Python, no process started.

The expected ranks are the textbook ones (the sign test's confidence interval for a median: e.g.
Conover, Practical Nonparametric Statistics, table A3), not read from the harness."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "bench_run", Path(__file__).resolve().parent.parent / "benchmarks" / "run.py")
run = sys.modules["bench_run"] = importlib.util.module_from_spec(_spec)  # its dataclasses look it up
_spec.loader.exec_module(run)


@pytest.mark.parametrize("n, k, coverage", [(6, 1, 0.969), (10, 2, 0.979), (15, 4, 0.965), (16, 4, 0.979),
                                            (20, 6, 0.959), (30, 10, 0.957)])
def test_median_interval_is_the_sign_tests(n, k, coverage):
    xs = [float(i) for i in range(n, 0, -1)]  # unsorted on purpose: x(i) == i once sorted
    lo, hi, cov = run.median_ci(xs)
    assert (lo, hi) == (k, n + 1 - k) and round(cov, 3) == coverage


def test_too_few_pairs_give_no_interval():
    assert run.median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) is None
    assert run.paired([1.0] * 5, 1.1)["verdict"] == "N/A"


def test_verdict_against_a_budget():
    below = [1.00, 1.02, 1.03, 1.04, 1.05, 1.05, 1.06, 1.06, 1.07, 1.07, 1.08, 1.08, 1.09, 1.20, 1.30]
    st = run.paired(below, 1.10)
    assert st["n"] == 15 and st["ci95"] == [1.04, 1.08] and st["verdict"] == "PASS"
    assert st["above_limit"] == 2 and st["p_below"] == pytest.approx(121 / 32768)  # P(B <= 2), B ~ Bin(15, 1/2)
    assert run.paired([x + 0.1 for x in below], 1.10)["verdict"] == "FAIL"  # interval 1.14 - 1.18
    assert run.paired([x + 0.04 for x in below], 1.10)["verdict"] == "UNDECIDED"  # 1.08 - 1.12
