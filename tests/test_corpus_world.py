"""End-to-end: the real CLI on the world corpus (tests/corpus_world/), programs adapted from public reports.

Every program (NAME.py, or NAME/main.py with its package beside it; format: tests/corpus/score.py) was
checked with torch alone by tests/corpus_world/verify.py. This runs `python -m tensorscope explain PROG
--json` on each (a module-scoped pool of 2 workers, as tests/test_corpus.py does) and asserts:

- no false alarm: a fine program gets no diagnosis and no hazard;
- behaviour identical to python: the JSON's exit status and explain's last stderr line equal plain
  `python PROG`'s, recorded in tests/corpus_world/plain_python.json per file hash and torch version (a
  program whose hash does not match is run under plain python on the spot);
- accuracy never regresses: tests/corpus_world/floors.json lists the figures measured (kind / culprit /
  saved / backward / fine / silent, right/total) and every miss with what tensorscope said. A program
  wrong on a measure that floors.json does not list as a miss fails, and so does a listed miss that is
  now right (rerecord: `python tests/corpus/score.py --dir tests/corpus_world --write-floors`), so the
  floor only moves up. With every program run, each figure must be at least the recorded one.

Cost: one tensorscope process per program (~2.4 s of CPU each, measured). Above CI_MAX programs CI runs a
fixed sample (CI_FINE fine programs and other ones up to CI_MAX, each in the order of a hash of their names);
TENSORSCOPE_CORPUS_FULL=1 runs them all and checks the recorded figures too. `python tests/corpus/score.py --dir tests/corpus_world` prints the table and the misses.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from tests._cli import run_many, selected_programs
from tests._sample import FULL, ci_sample

_SCORE = Path(__file__).resolve().parent / "corpus" / "score.py"
_spec = importlib.util.spec_from_file_location("tensorscope_corpus_score", _SCORE)
if _spec.name in sys.modules:
    score = sys.modules[_spec.name]
else:
    score = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = score  # dataclasses look their module up in sys.modules
    _spec.loader.exec_module(score)

WORLD = Path(__file__).resolve().parent / "corpus_world"
FLOORS = json.loads((WORLD / "floors.json").read_text())
ALL = [score.parse(p) for p in score.programs(WORLD)]
# Programs run by default: each costs a `tensorscope explain` (~2.7 s of CPU; python's own behaviour is
# recorded in plain_python.json; 80 programs took 344 s of the suite's 13.5 minutes on 2 cores when each
# also ran under python), so the suite keeps a deterministic sample of 18 (see _ci_sample).
# `score.py --dir tests/corpus_world` and TENSORSCOPE_CORPUS_FULL=1 run all of them.
CI_MAX = 18
CI_FINE = 6


def _ci_sample(progs):
    # Fine programs (no false alarm is the must-hold) and the others, each sampled by a hash of their
    # names (stable as programs are added): CI_FINE fine ones, the rest up to CI_MAX.
    fine = [p for p in progs if p.kind == "none" and not p.hazard]
    rest = [p for p in progs if not (p.kind == "none" and not p.hazard)]
    keep = {p.name for p in ci_sample(fine, CI_FINE) + ci_sample(rest, max(0, CI_MAX - min(CI_FINE, len(fine))))}
    return [p for p in progs if p.name in keep]


PROGRAMS = _ci_sample(ALL)
IDS = [p.stem for p in PROGRAMS]


@pytest.fixture(scope="module")
def results(request):
    """{name: (Explained, plain behaviour, verdicts)}, computed once: the explain runs are forks of one
    process that imported torch once (tests/_forked.py), as score.explain runs them one by one."""
    golden = score.load_golden(WORLD)
    progs = selected_programs(request, PROGRAMS, __file__)
    runs = run_many([("tensorscope", "explain", "--json", prog.path) for prog in progs], timeout=score.TIMEOUT_S)
    out = {}
    for prog, (rc, stdout, stderr, _) in zip(progs, runs):
        res = score.explained(rc, stdout, stderr)
        out[prog.name] = (res, score.plain_behaviour_cached(prog.path, golden), score.check(prog, res))
    return out


def test_world_corpus_is_well_formed():
    fine = [p for p in ALL if p.kind == "none" and not p.hazard]
    assert len(ALL) >= 60
    assert len(fine) >= 15
    assert sum(1 for p in ALL if p.hazard == "silent-saved-tensor-write") >= 15
    assert sum(1 for p in ALL if p.multi_file) >= 15
    for prog in ALL:
        assert prog.source and prog.source.startswith("http"), f"{prog.name}: line 1 must be '# source: URL'"
        if prog.kind != "none" or prog.hazard:
            assert prog.culprit_lines, f"{prog.name}: no '# <- culprit' marker"
    listed = set(FLOORS["misses"])
    assert listed <= {p.name for p in ALL}, f"floors.json lists programs that do not exist: {listed - {p.name for p in ALL}}"


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_explain_keeps_the_programs_behaviour(prog, results):
    res, plain, _ = results[prog.name]
    assert res.doc is not None, f"{prog.name}: {res.error}"
    assert res.doc["program"]["exit_status"] == plain["returncode"]
    if plain["returncode"] != 0:
        assert res.last_stderr_line == plain["last_stderr_line"]


@pytest.mark.parametrize("prog", [p for p in PROGRAMS if p.kind == "none" and not p.hazard], ids=lambda p: p.stem)
def test_no_false_alarm(prog, results):
    res, _, verdicts = results[prog.name]
    assert verdicts["fine"] is True, f"{prog.name}: false alarm: {score.describe(prog, res)}"


@pytest.mark.parametrize("prog", PROGRAMS, ids=IDS)
def test_accuracy_does_not_regress(prog, results):
    res, _, verdicts = results[prog.name]
    wrong = sorted(k for k, ok in score.measures(prog, verdicts).items() if not ok)
    listed = FLOORS["misses"].get(prog.name, {}).get("measures", [])
    new = [m for m in wrong if m not in listed]
    fixed = [m for m in listed if m not in wrong]
    assert not new, (
        f"{prog.name}: regression on {new}\n  expected: {score.expected(prog)}\n  got:      {score.describe(prog, res)}"
    )
    assert not fixed, (
        f"{prog.name}: now right on {fixed}: raise the floor with "
        "`python tests/corpus/score.py --dir tests/corpus_world --write-floors`"
    )


def test_figures_at_least_the_floors(results):
    if len(PROGRAMS) != len(ALL):
        pytest.skip("a CI sample: the per-program floors above hold; TENSORSCOPE_CORPUS_FULL=1 checks the figures")
    rows = [(p, *results[p.name][::2]) for p in PROGRAMS]  # (prog, res, verdicts)
    figs = score.figures([(p, r, v) for p, r, v in rows])
    for name, (right, total) in FLOORS["figures"].items():
        got_right, got_total = figs[name]
        floor = right / total if total else 0.0
        assert got_total == 0 or got_right / got_total >= floor, f"{name}: {got_right}/{got_total} below floor {right}/{total}"
