"""Programs nobody here had seen when their mechanism was written (tests/programs/unseen14/, benchmarks/RESULTS.md
"leak14"): each marks the line tensorscope must name (``# CULPRIT``), its kind (``# expect-kind:``) and the
ablation that fixes it (``FIX:``, applied to make the twin). The truth is torch's: the aliasing programs print
``TRUTH changed=True`` on the leak and ``False`` on the twin (a copy compared with torch.equal /
np.array_equal), and under tensorscope they print the same; the growth programs' headers carry the growth
per step tests/retention_truth.py measured (leak > 0, twin 0).
"""

from __future__ import annotations

import pytest

from _cli import REPO, run_many
from retention_truth import culprit_line, expected_kind, twin_source

HERE = REPO / "tests" / "programs" / "unseen14"
WATCHED = {"graph-kept-alive", "view-pins-storage", "hook-holds-tensors", "container-grows", "kept-value-changed",
           "shared-state", "backward-twice"}


def _found(doc: dict) -> list[dict]:
    out = [h for h in doc.get("hazards") or [] if h["kind"] in WATCHED]
    if doc.get("diagnosis"):
        out.append(doc["diagnosis"])
    return out


def _score(names: list[str], tmp_path):
    progs = [HERE / n for n in names]
    jobs = []
    for p in progs:
        twin = tmp_path / p.name
        twin.write_text(twin_source(p.read_text()))
        jobs += [("tensorscope", "run", "--json", str(p)), ("tensorscope", "run", "--json", str(twin))]
    runs = run_many(jobs)
    for i, p in enumerate(progs):
        (_, out, err, leak), (_, tout, terr, fixed) = runs[2 * i], runs[2 * i + 1]
        assert leak is not None and fixed is not None, (err + terr)[-2000:]
        text = p.read_text()
        kind, line = expected_kind(text), culprit_line(text)
        got = [(h["kind"], (h.get("culprit") or {}).get("line")) for h in _found(leak)]
        assert (kind, line) in got, (p.name, got)
        assert not _found(fixed), (p.name, _found(fixed))
        yield p, leak, fixed, err, terr


@pytest.mark.parametrize("names", [
    # NOTE [An optimizer's state_dict is its state]; NOTE [The caller's data written through an alias] (a view
    # taken in __getitem__, one handed to the writing function, torch.from_numpy / as_tensor of the caller's array)
    ["46_optimizer_state_best.py", "47_dataset_normalize_inplace.py", "48_from_numpy_clip_user_array.py",
     "augment_writes_batch_view.py"],
])
def test_silent_aliasing_of_unseen_programs(names, tmp_path):
    for p, leak, fixed, err, terr in _score(names, tmp_path):
        # the program's own truth, printed to stderr under --json (its stdout goes there): torch/numpy compared
        # the kept or the caller's data with a copy taken before
        assert "TRUTH changed=True" in err and "TRUTH changed=False" in terr, p.name
        (h,) = [h for h in _found(leak) if h["kind"] == "kept-value-changed"]
        assert h.get("kept_at", {}).get("line"), h


def test_growth_without_backward_and_a_value_computed_before_the_loop(tmp_path):
    """NOTE [Steps without backward]: a campaign that registers a hook per trial under no_grad (+1,024 B/step in
    torch's profiler, header; +0 for the twin); NOTE [A value computed once before the loop]: torch raises at the
    second iteration's backward, the ablation (detach at the marked line) runs."""
    names = ["hooks_registered_per_campaign.py", "backward_twice_embedding_before_loop.py"]
    for p, leak, fixed, err, terr in _score(names, tmp_path):
        f = _found(leak)[0]
        if f["kind"] == "backward-twice":
            assert "Trying to backward through the graph a second time" in err and "Traceback" not in terr
            continue
        assert "top-level module calls" in f["explanation"]
        assert f["retention"]["bytes_per_step"] > 0
