"""The `duplicate-index-write` kind: an index write whose index holds a position twice dropped updates silently."""

from __future__ import annotations

from tensorscope.kinds._base import Evidence, Kind, diagnosis, where
from tensorscope.source import code_at

KIND = Kind(
    code="duplicate-index-write",
    title="An index write with repeated indices dropped updates without any error.",
    explanation=(
        "`x[idx] += v` reads `x[idx]`, adds `v`, and writes the results back through `index_put_` without "
        "accumulation: where `idx` holds a position twice, both results land on it and only one survives "
        "(which one is not defined). `x[idx] = v` and `index_put_` with a per-position `v` do the same, so "
        "counts, histograms and scatter sums come out too small."
    ),
    causes=(
        "`counts[idx] += 1` with an index tensor that holds a position more than once.",
        "`x.index_put_((idx,), v)` without `accumulate=True` where `idx` repeats.",
    ),
    fixes=(
        "Accumulate: `x.index_add_(0, idx, v)` or `x.index_put_((idx,), v, accumulate=True)`.",
        "Count with `torch.bincount(idx, minlength=len(x))`.",
    ),
    hazard=True,
)


def explain(ev: Evidence, hazard: dict):
    file, line = hazard.get("file"), hazard.get("line")
    code = code_at(file, line)
    tid = hazard.get("tensor")
    receiver = (hazard.get("alias") or "x").split("[")[0] or "x"
    repeated, n = hazard.get("repeated"), hazard.get("indices")
    explanation = (
        f"Line {line} (`{code}`) wrote into {ev.label(tid)} through an index of {n} positions, {repeated} of them "
        "repeats of another: an index write without accumulation keeps one update per position, so the "
        f"other {repeated} update(s) were dropped without any error."
    )
    fix = (f"Accumulate instead: `{receiver}.index_add_(0, idx, values)` or "
           f"`{receiver}.index_put_((idx,), values, accumulate=True)` (for counts, `torch.bincount(idx)`).")
    return diagnosis(
        KIND,
        explanation=explanation,
        fix=fix,
        culprit=where(file, line, alias=hazard.get("alias")),
        tensor={"id": tid, "names": ev.tensor_names(tid), "version_at_save": None, "version_now": None},
        evidence=[f"{repeated} of {n} index positions repeat (checked at the write, on CPU)"],
    )
