"""End-to-end: the real CLI explains every program of tests/corpus/ as its header and markers say.

Each program declares its expected diagnosis (format: tests/corpus/score.py). For every program this
runs `python -m tensorscope explain --json PROG` once (a module-scoped pool of 2 workers) and checks the
diagnosis kind, the culprit / saved-by / backward lines, the alias, the saving node, the hazards and
explain's exit code (1 when something is diagnosed, 0 when fine).

Behaviour must not change under tensorscope. The reference is plain `python PROG` (exit status and the
last stderr line, i.e. the exception line), recorded in tests/corpus/plain_python.json per file hash and
torch version; a program whose hash does not match is run under plain python on the spot
(`python tests/corpus/score.py --refresh-golden` rerecords the file).
- every program: explain's own stderr ends with the same exception line, and its JSON reports the same
  exit status;
- `tensorscope run -o FILE.json PROG` has the same exit status and last stderr line: for a fixed sample
  (BEHAVIOUR_DEFAULT) by default, for every program with TENSORSCOPE_CORPUS_FULL=1. Each tensorscope
  process costs ~2 s of CPU (mostly importing torch) on this 2-core machine; a second process per
  program would not fit the 90 s budget.

- tests/test_fixes.py's sample: each fix parses and its rewrite of the culprit line removes the error
  (on the explain run above, and the golden plain-python line as the error's text).

Only the programs of the selected tests are run (all of them in a full run; `-k NAME` runs one).

`python tests/corpus/score.py [--behaviour]` prints the per-kind accuracy table for the same checks.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import pytest

import test_fixes
from tests._cli import run_many, selected_programs
from tests._sample import FULL, ci_sample

_SCORE = Path(__file__).resolve().parent / "corpus" / "score.py"
_spec = importlib.util.spec_from_file_location("tensorscope_corpus_score", _SCORE)
score = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = score  # dataclasses look their module up in sys.modules
_spec.loader.exec_module(score)

PROGRAMS = [score.parse(p) for p in score.programs()]


# `tensorscope run -o` is compared with plain python on these by default (every program with
# TENSORSCOPE_CORPUS_FULL=1): exit 0, exit 0 with a .data write, failures raised in backward, in
# torch.tensor() re-wrapping (once broken by instrumentation), in a CUDA call, and a ValueError.
BEHAVIOUR_DEFAULT = (
    "fine_torch_func_grad.py",
    "hazard_exp_data_zero.py",
    "inplace_gan_two_optimizers.py",
    "nograd_tensor_rewrap.py",
    "device_cuda_input_cpu_model.py",
    "other_bce_target_shape.py",
)


def _behaviour_sample():
    """The programs whose `tensorscope run -o` behaviour is compared."""
    if FULL:
        return list(PROGRAMS)
    return [p for p in PROGRAMS if p.name in BEHAVIOUR_DEFAULT]


BEHAVIOUR = _behaviour_sample()
# Each program costs a `tensorscope explain` (~3 s of CPU): CI explains a fixed sample of them, a share
# of each kind (tests/_sample.py), plus the programs whose run behaviour and fixes are checked below;
# TENSORSCOPE_CORPUS_FULL=1 (and `python tests/corpus/score.py`) explain every one.
CI_EXPLAINED = 20
_FIXED = set(test_fixes.default_sample())
_KEEP = ({p.name for p in ci_sample(PROGRAMS, CI_EXPLAINED, group=lambda p: p.kind or p.hazard)}
         | {p.name for p in BEHAVIOUR} | {p.name for p in PROGRAMS if p.path in _FIXED})
EXPLAINED = [p for p in PROGRAMS if p.name in _KEEP]
IDS = [p.path.stem for p in EXPLAINED]


def _skip_reason(prog):
    if prog.cpu_only:
        import torch  # only here: the test process itself has no other use for torch

        if torch.cuda.is_available():
            return "the expectation holds on a CPU-only build of torch"
    return None


@pytest.fixture(scope="module")
def results(request):
    """{name: {"explain": Explained, "plain": {...}, "run": {...} or None}}, computed once: the explain and
    run processes are forks of one process that imported torch once (tests/_forked.py), as
    score.explain and score.tensorscope_behaviour run them one by one."""
    golden = score.load_golden()
    sampled = {p.name for p in BEHAVIOUR}
    todo = [p for p in selected_programs(request, EXPLAINED, __file__) if _skip_reason(p) is None]
    with tempfile.TemporaryDirectory(prefix="ts-corpus-") as tmp:
        jobs = [("tensorscope", "explain", "--json", p.path) for p in todo]
        jobs += [("tensorscope", "run", "-o", Path(tmp) / f"{i}.json", p.path)
                 for i, p in enumerate(todo) if p.name in sampled]
        runs = run_many(jobs, timeout=score.TIMEOUT_S)
    explained, behaved = runs[:len(todo)], iter(runs[len(todo):])
    out = {}
    for prog, (rc, stdout, stderr, _) in zip(todo, explained):
        run = None
        if prog.name in sampled:
            run_rc, _, run_err, _ = next(behaved)
            run = {"returncode": run_rc, "last_stderr_line": score._last_line(run_err)}
        out[prog.name] = {"explain": score.explained(rc, stdout, stderr),
                          "plain": score.plain_behaviour_cached(prog.path, golden), "run": run}
    return out


def _get(results, prog):
    reason = _skip_reason(prog)
    if reason:
        pytest.skip(reason)
    return results[prog.name]


def test_corpus_is_big_and_well_formed():
    kinds = [p.kind for p in PROGRAMS]
    assert len(PROGRAMS) >= 55
    assert sum(1 for p in PROGRAMS if p.kind == "none" and not p.hazard) >= 12
    assert kinds.count("inplace-modified-saved-tensor") >= 15
    assert sum(1 for p in PROGRAMS if p.hazard == "silent-saved-tensor-write") >= 3
    assert len(BEHAVIOUR) == (len(PROGRAMS) if FULL else len(BEHAVIOUR_DEFAULT))
    for prog in PROGRAMS:
        assert 10 <= len(prog.path.read_text().splitlines()) <= 40, prog.name
        if prog.kind != "none" or prog.hazard:
            assert prog.culprit_lines, f"{prog.name}: no '# <- culprit' marker"


@pytest.mark.parametrize("prog", EXPLAINED, ids=IDS)
def test_explain_finds_what_the_program_declares(prog, results):
    r = _get(results, prog)
    if prog.kind != "none" and r["plain"]["returncode"] == 0:
        # torch itself decides: 2.15.0 fills `x[:, 0] = 0.0` on an expand()ed tensor where 2.14.1 raised
        # the internal-overlap error, so overlap_expand_setitem runs clean there (and clean under explain)
        pytest.skip(f"this torch runs {prog.name} without the {prog.kind} failure it declares")
    res = r["explain"]
    assert res.doc is not None, f"{prog.name}: {res.error}"
    verdicts = score.check(prog, res)
    wrong = [k for k, ok in verdicts.items() if ok is False]
    assert not wrong, (
        f"{prog.name}: wrong {wrong}\n  expected: {score.expected(prog)}\n  got:      {score.describe(prog, res)}"
    )


@pytest.mark.parametrize("prog", EXPLAINED, ids=IDS)
def test_explain_keeps_the_programs_exception(prog, results):
    r = _get(results, prog)
    res, plain = r["explain"], r["plain"]
    assert res.doc is not None, f"{prog.name}: {res.error}"
    assert res.doc["program"]["exit_status"] == plain["returncode"]
    if plain["returncode"] != 0:
        assert res.last_stderr_line == plain["last_stderr_line"]


@pytest.mark.parametrize("prog", BEHAVIOUR, ids=[p.path.stem for p in BEHAVIOUR])
def test_run_does_not_change_behaviour(prog, results):
    r = _get(results, prog)
    assert r["run"] == r["plain"]


# tests/test_fixes.py's sample of programs whose fixes are checked: on the explain run made above.
FIXES = [p for p in PROGRAMS if p.path in set(test_fixes.default_sample())]


@pytest.mark.parametrize("prog", FIXES, ids=[p.path.stem for p in FIXES])
def test_fix_is_valid_code_and_its_rewrite_removes_the_error(prog, results, tmp_path):
    r = _get(results, prog)
    assert r["explain"].doc is not None, f"{prog.name}: {r['explain'].error}"
    test_fixes.check_fix(prog.path, r["explain"].doc, r["plain"]["last_stderr_line"].rstrip(), tmp_path)
