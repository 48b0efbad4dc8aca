"""The `running-stats-updated-twice` kind: a BatchNorm module updated its running statistics twice for one batch (checkpoint recomputation, or a second call on the same input).

The instrumentation sees each update (``num_batches_tracked.add_(1)`` in BatchNorm's forward) and
reports one made during backward, or with gradients off on the same input as the module's previous
update; a second forward with gradients on (R-Drop, two augmentations) is meant and not reported (see
NOTE [Running statistics updated twice] in instrument/runningstats.py).
"""

from __future__ import annotations

from tensorscope.kinds._base import Evidence, Kind, diagnosis, where
from tensorscope.source import code_at

KIND = Kind(
    code="running-stats-updated-twice",
    title="A BatchNorm module updated its running statistics twice for the same batch.",
    explanation=(
        "In training mode every BatchNorm call updates `running_mean`, `running_var` and "
        "`num_batches_tracked`. Activation checkpointing (`torch.utils.checkpoint`) reruns the checkpointed "
        "forward during backward, and a second call on the same batch with gradients off (a metric, an evaluation "
        "pass left in training mode) runs "
        "it again: the batch counts twice in the running averages, `num_batches_tracked` advances twice per "
        "step, and evaluation uses statistics that are not those of the data. Nothing raises."
    ),
    causes=(
        "A BatchNorm inside a function given to `torch.utils.checkpoint.checkpoint`.",
        "`model(x)` called again on the same batch in training mode under `torch.no_grad()` (a metric).",
    ),
    fixes=(
        "Keep BatchNorm out of the checkpointed function: checkpoint the layers around it.",
        "Make the second call in evaluation mode (`model.eval()` under `torch.no_grad()`), or reuse the first output.",
    ),
    hazard=True,
)


def explain(ev: Evidence, hazard: dict):
    first, second = hazard.get("first") or {}, hazard.get("second") or {}
    how, count = hazard.get("how"), hazard.get("count") or 1
    module = hazard.get("module") or "a BatchNorm module"
    fcode, scode = code_at(first.get("file"), first.get("line")), code_at(second.get("file"), second.get("line"))
    if how == "recomputed in backward":
        why = (f"line {second.get('line')} (`{scode}`) ran backward, and checkpointing recomputed the forward of "
               f"{module} there, updating its running statistics a second time")
        fix = (f"Keep the BatchNorm out of the checkpointed function called at line {first.get('line')}: checkpoint "
               "the layers before it and call the BatchNorm outside `checkpoint(...)`, so it runs once per batch "
               "(a BatchNorm in `eval()` mode is not affected).")
    else:
        why = (f"line {second.get('line')} (`{scode}`) called it again on the same input in training mode with "
               "gradients off, updating "
               "its running statistics a second time")
        fix = (f"Make the second call at line {second.get('line')} in evaluation mode (`model.eval()` and "
               "`torch.no_grad()`, then `model.train()`), or reuse the output of the first call.")
    explanation = (
        f"{module} updated its running statistics at line {first.get('line')} (`{fcode}`); then {why}"
        + (f" ({count} double updates in all)" if count > 1 else "")
        + ": the batch counts twice in `running_mean`/`running_var`, and `num_batches_tracked` advances twice "
        "per step. Nothing raised."
    )
    tid = hazard.get("tensor")
    return diagnosis(
        KIND,
        explanation=explanation,
        fix=fix,
        culprit=where(second.get("file"), second.get("line")),
        tensor={"id": tid, "names": ev.tensor_names(tid), "version_at_save": None, "version_now": None},
        alias_chain=[d for d in (where(first.get("file"), first.get("line"), what="the first update"),) if d],
        evidence=[f"{module}: running statistics updated at line {first.get('line')} and again at line "
                  f"{second.get('line')} ({how}), {count} time(s)"],
    ) | {"kept_at": where(first.get("file"), first.get("line"), how="first update")}
