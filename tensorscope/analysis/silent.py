"""silent-saved-tensor-write: a saved tensor changed without a version bump (wrong gradients, no error)."""

from __future__ import annotations

from tensorscope.analysis.common import Evidence, diagnosis, where
from tensorscope.report import code_at

CODE = "silent-saved-tensor-write"


def explain(ev: Evidence, hazard: dict) -> dict:
    writes = hazard.get("writes") or []
    first = writes[0] if writes else {}
    label = ev.label(hazard.get("tensor"))
    saved_code = code_at(hazard.get("saved_file"), hazard.get("saved_line"))
    via = first.get("alias") or "an alias"
    op = first.get("op", "")
    line = first.get("line")
    wcode = code_at(first.get("file"), line)
    if op == "data_set":
        how = (f"line {line} (`{wcode}`) swapped its data with `.data = ...`: it now reads another "
               "storage, and its version counter did not move")
        fix = (f"Do not assign `.data` on a tensor the graph saved; build a new tensor and a new forward pass, "
               f"or wrap the update in `with torch.no_grad(): {via}.copy_(...)` so autograd can see it.")
    else:
        how = (f"line {line} (`{wcode}`) wrote into its memory through `{via}`, which shares the storage but "
               "not the version counter, so the version did not move")
        fix = (f"Replace `.data` with `.detach()` at line {line} (then autograd raises instead of computing a "
               f"wrong gradient), or write into a clone: `{via.replace('.data', '.detach().clone()')}`; if the "
               "write is meant to change the forward value, redo the forward pass after it.")
    node = hazard.get("node")
    explanation = (
        f"{label} was saved for backward by {node or 'a backward node'}"
        + (f" at line {hazard['saved_line']} (`{saved_code}`)" if hazard.get("saved_line") else "")
        + f", then {how}. Backward used the changed values without any error: the gradients it computed "
        "are wrong."
    )
    backward = hazard.get("backward") or {}
    return diagnosis(
        CODE,
        explanation=explanation,
        fix=fix,
        culprit=where(first.get("file"), line, alias=first.get("alias")),
        saved_by=where(hazard.get("saved_file"), hazard.get("saved_line"), node=node),
        backward=where(backward.get("file"), backward.get("line")),
        tensor={"id": hazard.get("tensor"), "names": ev.tensor_names(hazard.get("tensor")),
                "version_at_save": hazard.get("version_at_save"), "version_now": hazard.get("version_now")},
        other_writes=[where(w.get("file"), w.get("line"), alias=w.get("alias")) for w in writes[1:] if w.get("line")],
        evidence=["write into the saved tensor's bytes that did not bump its version counter"],
    )
