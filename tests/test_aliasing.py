"""Silent aliasing (issue 20, family 1): kept values that change, memory groups, dropped index updates.

tests/corpus_aliasing/ holds our own programs written from public reports (each names its source),
every one with a fine twin (``*_fine.py``). Truth comes from torch, in the program itself: it keeps
an independent ``clone()`` at keeping time (or computes the expected result with ``index_add_``) and
prints ``TRUTH changed=True|False``; plain python's line is recorded in truth.json, and the bug
programs must print True, the twins False. The real CLI (`run --fail-on hazard -o REPORT.json`) then runs
each once: the program prints the same truth line under tensorscope, a bug program gets a hazard of the
expected kind whose culprit is the line marked ``# <- culprit``, a twin gets no hazard at all.
`python tests/test_aliasing.py` prints the score and rerecords truth.json under plain python.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from _cli import REPO, run_cli, run_python, validate_against_schema

CORPUS = REPO / "tests" / "corpus_aliasing"
PROGRAMS = sorted(CORPUS.glob("*.py"))
TRUTH = CORPUS / "truth.json"
DUPLICATE = ("19_", "20_", "21_", "22_")


def expected(path: Path):
    """(kind or None, culprit line or None) of a corpus program."""
    if path.stem.endswith("_fine"):
        return None, None
    lines = path.read_text().splitlines()
    culprit = next(i for i, line in enumerate(lines, 1) if line.rstrip().endswith("# <- culprit"))
    kind = "duplicate-index-write" if path.name.startswith(DUPLICATE) else "kept-value-changed"
    return kind, culprit


def truth_line(stdout: str) -> str | None:
    found = re.findall(r"^TRUTH changed=(?:True|False)$", stdout, re.M)
    return found[-1] if found else None


def _one(path: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        rc, stdout, stderr, _ = run_cli("run", "--fail-on", "hazard", "-o", str(out), str(path))
        doc = json.loads(out.read_text()) if out.exists() else None
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "doc": doc}


@pytest.fixture(scope="module")
def results():
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return dict(zip(PROGRAMS, pool.map(_one, PROGRAMS)))


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
    bugs = [p for p in PROGRAMS if not p.stem.endswith("_fine")]
    assert len(bugs) >= 20
    for p in bugs:
        assert (CORPUS / f"{p.stem}_fine.py").exists(), p.name
        assert p.read_text().startswith("# From: "), p.name


def test_the_recorded_truth_says_bug_programs_change_and_twins_do_not():
    truth = json.loads(TRUTH.read_text())
    assert sorted(truth) == [p.name for p in PROGRAMS]
    for name, line in truth.items():
        assert line == f"TRUTH changed={not name.endswith('_fine.py')}", name


def test_the_cli_finds_each_kept_value_and_dropped_update_with_no_false_alarm(results):
    truth = json.loads(TRUTH.read_text())
    for path, r in results.items():
        assert r["doc"] is not None, (path.name, r["stderr"][-2000:])
        validate_against_schema(r["doc"])
        # the program behaves as under plain python
        assert truth_line(r["stdout"]) == truth[path.name], path.name
        kind, _ = expected(path)
        assert r["rc"] == (5 if r["doc"]["hazards"] else 0), (path.name, r["rc"])
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


def test_sarif_and_the_terminal_carry_the_new_hazards(tmp_path):
    prog = CORPUS / "19_histogram_iadd.py"
    sarif = tmp_path / "r.sarif"
    rc, stdout, _, _ = run_cli("run", "--fail-on", "hazard", "-o", str(sarif), str(prog))
    assert rc == 5
    results = json.loads(sarif.read_text())["runs"][0]["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [("duplicate-index-write", "warning")]
    rc, stdout, _, _ = run_cli("run", "--fail-on", "hazard", str(prog))
    assert rc == 5
    assert "duplicate-index-write" in stdout and "index_add_" in stdout and "19_histogram_iadd.py:6" in stdout


if __name__ == "__main__":
    rec = {}
    for p in PROGRAMS:
        out = subprocess.run([sys.executable, str(p)], capture_output=True, text=True).stdout
        rec[p.name] = truth_line(out)
    TRUTH.write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps(score({p: _one(p) for p in PROGRAMS}), indent=1))
