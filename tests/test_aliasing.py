"""Silent aliasing (issue 20, family 1): kept values that change, memory groups, dropped index updates,
state two objects share, running statistics updated twice, ctx attributes changed before backward.

tests/corpus_aliasing/ holds our own programs written from public reports (each names its source),
every one with a fine twin (``*_fine.py``); a few fine programs stand alone (tied weights: one model's
parts sharing a parameter on purpose). Truth comes from torch, in the program itself: it keeps
an independent ``clone()`` at keeping time, runs an independent copy of the module or optimizer, or
computes the expected gradient or result another way, and prints ``TRUTH changed=True|False``; plain
python's line is recorded in truth.json, and the bug programs must print True, the twins (the
ablation: the same program with the fix) False. The real CLI (`run --fail-on hazard -o REPORT.json`)
then runs each once, and that one process answers every check: the program prints the same truth
line under tensorscope, the exit status is 5 exactly when there is a hazard, the report validates
against the schema, a bug program gets a hazard of the expected kind whose culprit is the line marked
``# <- culprit``, a twin gets no hazard at all, and the same report renders to SARIF and the terminal
with the hazard in them.

CI runs a deterministic sample (see _ci_sample): one pair per kind, chosen by a hash of its name, and
the programs the fact tests read; TENSORSCOPE_CORPUS_FULL=1 runs every program.
`python tests/test_aliasing.py` rerecords truth.json under plain python and prints the full score.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from _cli import REPO, run_cli, run_many, load_report, validate_against_schema
from tensorscope.render import render

CORPUS = REPO / "tests" / "corpus_aliasing"
ALL = sorted(CORPUS.glob("*.py"))
TRUTH = CORPUS / "truth.json"
FULL = os.environ.get("TENSORSCOPE_CORPUS_FULL", "") not in ("", "0")
#: the kind of a bug program, by its number (the rest are kept-value-changed)
KIND_BY_NUMBER = {
    **dict.fromkeys(("19", "20", "21", "22"), "duplicate-index-write"),
    **dict.fromkeys(("23", "24", "25", "32", "33", "34", "35", "38"), "shared-state"),
    **dict.fromkeys(("26", "27", "28"), "running-stats-updated-twice"),
    **dict.fromkeys(("29", "30"), "ctx-attribute-changed"),
}
#: programs the fact tests below read: always in the sample
ANCHORS = ("01_best_state_dict.py", "07_two_from_numpy.py", "07_two_from_numpy_fine.py", "31_tied_weights_fine.py",
           "33_teacher_shallow_copy.py", "33_teacher_shallow_copy_fine.py", "36_rdrop_two_forwards_fine.py",
           "40_best_in_main.py", "40_best_in_main_fine.py", "41_numpy_history.py", "41_numpy_history_fine.py",
           "42_numpy_initial_weights.py", "42_numpy_initial_weights_fine.py", "43_best_rebound_in_loop.py",
           "43_best_rebound_in_loop_fine.py", "46_checkpoint_saved_each_eval_fine.py",
           "47_drift_logged_at_loop_top.py", "47_drift_logged_at_loop_top_fine.py")


def kind_of(path: Path) -> str:
    return KIND_BY_NUMBER.get(path.name[:2], "kept-value-changed")


def _ci_sample(programs):
    """Every program under TENSORSCOPE_CORPUS_FULL=1; else, per kind, the bug program first in the order
    of a hash of its name and its twin (stable as programs are added), and the anchors."""
    if FULL:
        return list(programs)
    keep = set(ANCHORS)
    bugs = sorted((p for p in programs if not p.stem.endswith("_fine")),
                  key=lambda p: hashlib.sha256(p.name.encode()).hexdigest())
    kinds = {kind_of(p) for p in bugs if p.name in ANCHORS}  # the anchors stand for their kind
    for p in bugs:
        if kind_of(p) not in kinds and p.name not in ANCHORS:
            kinds.add(kind_of(p))
            keep |= {p.name, f"{p.stem}_fine.py"}
    return [p for p in programs if p.name in keep]


PROGRAMS = _ci_sample(ALL)


def expected(path: Path):
    """(kind or None, culprit line or None) of a corpus program."""
    if path.stem.endswith("_fine"):
        return None, None
    lines = path.read_text().splitlines()
    culprit = next(i for i, line in enumerate(lines, 1) if line.rstrip().endswith("# <- culprit"))
    return kind_of(path), culprit


def truth_line(stdout: str) -> str | None:
    found = re.findall(r"^TRUTH changed=(?:True|False)$", stdout, re.M)
    return found[-1] if found else None


def _one(path: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        rc, stdout, stderr, _ = run_cli("run", "--fail-on", "hazard", "-o", str(out), str(path))
        doc = load_report(out.read_text()) if out.exists() else None
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "doc": doc}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """What ``_one`` gives for each program, the runs forked from one process that imported torch once."""
    folder = tmp_path_factory.mktemp("aliasing")
    reports = [folder / f"{path.stem}.json" for path in PROGRAMS]
    runs = run_many([("tensorscope", "run", "--fail-on", "hazard", "-o", out, path)
                     for path, out in zip(PROGRAMS, reports)])
    return {path: {"rc": rc, "stdout": stdout, "stderr": stderr,
                   "doc": load_report(out.read_text()) if out.exists() else None}
            for path, out, (rc, stdout, stderr, _) in zip(PROGRAMS, reports, runs)}


def score(results) -> dict:
    s = {"programs": 0, "kind": 0, "culprit": 0, "twins": 0, "twins_clean": 0, "misses": []}
    for path, r in results.items():
        kind, culprit = expected(path)
        hazards = (r["doc"] or {}).get("hazards") or []
        if kind is None:
            s["twins"] += 1
            s["twins_clean"] += not hazards
            if hazards:
                s["misses"].append(f"{path.name}: false alarm {[h['kind'] for h in hazards]}")
            continue
        s["programs"] += 1
        mine = [h for h in hazards if h["kind"] == kind]
        s["kind"] += bool(mine)
        hit = any((h.get("culprit") or {}).get("line") == culprit for h in mine)
        s["culprit"] += hit
        if not hit:
            s["misses"].append(f"{path.name}: {[(h['kind'], (h.get('culprit') or {}).get('line')) for h in hazards]}")
    return s


def test_the_corpus_is_large_enough_and_each_program_has_a_twin():
    bugs = [p for p in ALL if not p.stem.endswith("_fine")]
    assert len(bugs) >= 20
    assert {kind_of(p) for p in bugs} == {"kept-value-changed", "duplicate-index-write", "shared-state",
                                          "running-stats-updated-twice", "ctx-attribute-changed"}
    for p in bugs:
        assert (CORPUS / f"{p.stem}_fine.py").exists(), p.name
        assert p.read_text().startswith("# From: "), p.name


def test_the_recorded_truth_says_bug_programs_change_and_twins_do_not():
    truth = json.loads(TRUTH.read_text())
    assert sorted(truth) == [p.name for p in ALL]
    for name, line in truth.items():
        assert line == f"TRUTH changed={not name.endswith('_fine.py')}", name


def test_the_cli_finds_each_silent_alias_with_no_false_alarm_on_every_surface(results):
    truth = json.loads(TRUTH.read_text())
    for path, r in results.items():
        assert r["doc"] is not None, (path.name, r["stderr"][-2000:])
        doc = r["doc"]
        validate_against_schema(doc)
        # the program behaves as under plain python
        assert truth_line(r["stdout"]) == truth[path.name], path.name
        kind, culprit = expected(path)
        assert r["rc"] == (5 if doc["hazards"] else 0), (path.name, r["rc"])  # --fail-on hazard
        # the same report as SARIF and in the terminal
        sarif = json.loads(render(doc, "sarif"))["runs"][0]["results"]
        text = render(doc, "text", width=100, color=False)
        if kind is None:
            assert not sarif and "Hazard" not in text, path.name
            continue
        assert (kind, "warning") in [(x["ruleId"], x["level"]) for x in sarif], path.name
        assert kind in text and f"{path.name}:{culprit}" in text, path.name
    s = score(results)
    print(json.dumps(s, indent=1))
    assert s["twins_clean"] == s["twins"], s["misses"]
    assert s["kind"] == s["programs"], s["misses"]
    assert s["culprit"] == s["programs"], s["misses"]


def test_a_kept_value_names_the_keeping_line_the_alias_and_the_fix(results):
    doc = results[CORPUS / "01_best_state_dict.py"]["doc"]
    (h,) = doc["hazards"]
    assert h["kept_at"]["line"] == 13 and h["kept_at"]["how"] == "state_dict"
    assert h["kept_at"]["code"] == "best = model.state_dict()"
    assert h["alias_chain"][0]["line"] == 13
    assert "copy.deepcopy(model.state_dict())" in h["fix"]
    assert h["tensor"]["names"][0].startswith("best[")


def test_a_state_dict_kept_in_a_tuple_assignment_is_named_by_its_own_target(tmp_path):
    """`best_reward, best_state = ep_reward, model.state_dict()` (pytorch/examples' actor_critic keeping its best
    policy, review18): the kept tensors are `best_state`'s, not the float's named first. torch: the kept value is
    no longer equal to a copy taken at the same time (the program prints it)."""
    prog = tmp_path / "best_in_tuple.py"
    prog.write_text(textwrap.dedent("""
        import torch

        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(32, 4), torch.randn(32, 1)


        def train():
            best_loss, best_state = float("inf"), None
            for epoch in range(4):
                loss = torch.nn.functional.mse_loss(model(x), y)
                if loss.item() < best_loss:
                    best_loss, best_state = loss.item(), model.state_dict()
                    copy = {k: v.clone() for k, v in best_state.items()}
                opt.zero_grad()
                loss.backward()
                opt.step()
            print("TRUTH changed=%s" % any(not torch.equal(best_state[k], copy[k]) for k in copy))


        train()
    """))
    out = tmp_path / "r.json"
    rc, stdout, stderr, _ = run_cli("run", "-o", str(out), str(prog))
    assert truth_line(stdout) == "TRUTH changed=True", stdout + stderr[-2000:]
    (h,) = [h for h in load_report(out.read_text())["hazards"] if h["kind"] == "kept-value-changed"]
    assert h["kept_at"]["line"] == 15 and "a tensor of `best_state`" in h["explanation"], h["explanation"]


def test_an_array_kept_by_np_asarray_is_a_kept_value(tmp_path):
    """NOTE [An array from np.asarray] (minGPT's chargpt keeping the head's weights with `np.asarray`, review18):
    `np.asarray(w)` is an array over `w`'s memory, `np.array(w)` a copy. torch and NumPy (the program prints both
    drifts): 0 for the first, not 0 for the second. Only the first is kept-value-changed; the run was clean."""
    prog = tmp_path / "asarray_kept.py"
    prog.write_text(textwrap.dedent("""
        import numpy as np
        import torch

        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(8, 4)
        start = {}
        for step in range(4):
            if step == 0:
                start["shared"] = np.asarray(model.weight.detach())
                start["copied"] = np.array(model.weight.detach())
            loss = model(x).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        w = model.weight.detach().numpy()
        print("drift", {k: bool(np.abs(w - v).max() > 0) for k, v in start.items()})
    """))
    out = tmp_path / "r.json"
    rc, stdout, stderr, _ = run_cli("run", "-o", str(out), str(prog))
    assert "drift {'shared': False, 'copied': True}" in stdout, stdout + stderr[-2000:]
    found = [h for h in load_report(out.read_text())["hazards"] if h["kind"] == "kept-value-changed"]
    assert [(h["kept_at"]["line"], h["kept_at"]["how"]) for h in found] == [(12, "numpy")], found
    assert "`np.asarray(...).copy()`" in found[0]["fix"], found[0]["fix"]


def test_a_kept_numpy_array_is_named_by_its_keeping_line(results):
    """`.numpy()` of a CPU tensor is an array over its memory: kept in a list while the tensor is written in
    place (41), or kept as the initial weights that the optimizer then changes (42); `.numpy().copy()` (the
    twins) is no finding."""
    for name, op_line, held in (("41_numpy_history.py", 11, "history"), ("42_numpy_initial_weights.py", 10, "initial")):
        doc = results[CORPUS / name]["doc"]
        (h,) = [h for h in doc["hazards"] if h["kind"] == "kept-value-changed"]
        assert h["kept_at"]["line"] == op_line and h["kept_at"]["how"] == "numpy", name
        assert f"the NumPy array kept in `{held}`" in h["explanation"] and ".numpy().copy()" in h["fix"], name
        assert results[CORPUS / name.replace(".py", "_fine.py")]["doc"]["hazards"] == []
    facts = [f for f in results[CORPUS / "41_numpy_history.py"]["doc"]["recording"]["hazards"]
             if f.get("kind") == "kept-value-changed"]
    assert facts and facts[0]["tensor"] is None and facts[0]["count"] == 3  # arrays of epochs 0 to 2 changed


def test_a_kept_value_freed_by_its_rebinding_is_read_only_before_it(results):
    """NOTE [When a kept value died]: the placeholder `best = model.state_dict()` (line 14) is changed by
    the first epoch's step and freed when line 24 rebinds `best`; the loads of `best` after that line read
    the new binding. With a deepcopy there (the twin) nothing is reported; without one the snapshot kept
    at line 24 is, and the placeholder is not."""
    fine = results[CORPUS / "43_best_rebound_in_loop_fine.py"]["doc"]
    (facts,) = [f for f in fine["recording"]["hazards"] if f.get("kind") == "kept-value-changed"]
    assert facts["kept"]["line"] == 14 and facts["alive_at_end"] is False and facts["died"]["line"] == 24
    assert fine["hazards"] == []
    (h,) = results[CORPUS / "43_best_rebound_in_loop.py"]["doc"]["hazards"]
    assert h["kept_at"]["line"] == 24 and h["culprit"]["line"] == 19


def test_memory_groups_join_distinct_storages_over_one_array(results):
    doc = results[CORPUS / "07_two_from_numpy.py"]["doc"]
    by_name = {n: t for t in doc["tensors"] for n in t["names"]}
    original, work = by_name["original"], by_name["work"]
    assert original["storage"] != work["storage"]  # two storage objects, both listed
    groups = {s["id"]: s["memory"] for s in doc["storages"]}
    assert groups[original["storage"]] == groups[work["storage"]]
    # a tensor over other memory is in a group of its own
    fine = results[CORPUS / "07_two_from_numpy_fine.py"]["doc"]
    by_name = {n: t for t in fine["tensors"] for n in t["names"]}
    groups = {s["id"]: s["memory"] for s in fine["storages"]}
    assert groups[by_name["original"]["storage"]] != groups[by_name["work"]["storage"]]


def test_a_frozen_copy_is_reported_at_the_one_write_that_changes_it(results):
    """``reference = copy.copy(model)`` is never updated itself: its one writer, the model's ``opt.step()``,
    is the culprit, with the line that made the sharing; no other writer. Its twin (``copy.deepcopy``) is
    clean, as is R-Drop's deliberate second forward in training mode (the running-statistics kind)."""
    path = CORPUS / "33_teacher_shallow_copy.py"
    (h,) = results[path]["doc"]["hazards"]
    assert h["kind"] == "shared-state" and h["culprit"]["line"] == expected(path)[1]
    assert h["kept_at"]["line"] == 8 and h["kept_at"]["how"] == "copy.copy"
    assert h["kept_at"]["code"] == "reference = copy.copy(model)"
    assert h["other_writes"] == [] and "never updates a tensor of its own" in h["explanation"]
    assert "copy.deepcopy(model)" in h["fix"]
    assert not results[CORPUS / "36_rdrop_two_forwards_fine.py"]["doc"]["hazards"]


def test_each_new_kind_names_the_sharing_line_and_a_fix(results):
    """Whichever programs of the three newer kinds the sample holds: where the state was shared (or kept
    on ctx, or first updated), and a fix that says what to do."""
    fixes = {"shared-state": ("deepcopy", "load_state_dict"), "running-stats-updated-twice": ("eval", "checkpoint"),
             "ctx-attribute-changed": ("save_for_backward", "clone")}
    seen = set()
    for path, r in results.items():
        kind, _ = expected(path)
        if kind not in fixes:
            continue
        (h,) = [h for h in r["doc"]["hazards"] if h["kind"] == kind]
        seen.add(kind)
        assert h["kept_at"]["line"] and h["alias_chain"], path.name
        assert any(word in h["fix"] for word in fixes[kind]), (path.name, h["fix"])
    assert seen == set(fixes)


if __name__ == "__main__":
    rec = {}
    for p in ALL:
        out = subprocess.run([sys.executable, str(p)], capture_output=True, text=True).stdout
        rec[p.name] = truth_line(out)
    TRUTH.write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps(score({p: _one(p) for p in ALL}), indent=1))


def test_young_kept_views_filed_only_if_alive_at_a_write():
    """NOTE [Young kept values]: views taken and dropped before any write are never filed; a view still
    alive at the next write is, and a later write into its bytes is found (in process, the real wrappers)."""
    import torch

    from tensorscope.instrument import session

    tracker = session.new_tracker(__file__)
    with session.active(tracker):
        for i in range(200):  # short_lived's loop: each view dies before the next write
            b = torch.full((8,), float(i)).clone()
            b.mul_(2)
            float(b[1:].sum())
        filed_while_dying = tracker.kept.n  # kept values filed so far (200 when each view is filed as taken)
        w = torch.ones(4)
        head = w[:2]  # kept, alive at the writes below
        w.add_(1)  # the next write: files `head`, and changes its bytes
        w[2:].mul_(3)  # bytes `head` does not read
    assert filed_while_dying == 0
    entries = [e for v in tracker.kept.keys.values() for e in v if e.ref() is head]
    # its first changing write named; later writes into its storage only counted
    assert len(entries) == 1 and entries[0].write["op"] == "add_" and entries[0].writes == 2, entries
    assert head.tolist() == [2.0, 2.0]  # torch: the kept view changed with its base
