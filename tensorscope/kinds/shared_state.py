"""The `shared-state` kind: two objects meant to hold state of their own (a model and its EMA, two optimizers) hold it over the same memory, so each one's update moves the other.

The instrumentation records where the sharing was made (a parameter another live module holds, an
optimizer's state loaded without a copy) and the distinct program lines that then wrote the shared
memory in place; two writers make the hazard (see NOTE [Shared state] in instrument/sharedstate.py).
"""

from __future__ import annotations

from tensorscope.kinds._base import Evidence, Kind, diagnosis, where
from tensorscope.source import code_at

KIND = Kind(
    code="shared-state",
    title="Two objects that should hold their own state share its memory, so each one's update moves the other.",
    explanation=(
        "Assigning a module's parameter to another module (`ema.weight = model.weight`), "
        "`load_state_dict(sd, assign=True)` and `Optimizer.load_state_dict` keep the given tensors instead of "
        "copying them. A model and its EMA or teacher, or two optimizers, then hold their state over the same "
        "memory: the optimizer step moves the EMA with the model, and each `step()` updates the other "
        "optimizer's moments. Nothing raises: the EMA equals the model, the moments are updated twice."
    ),
    causes=(
        "`ema.weight = model.weight`, or `ema.load_state_dict(model.state_dict(), assign=True)`.",
        "`opt_b.load_state_dict(opt_a.state_dict())` while both optimizers go on stepping.",
    ),
    fixes=(
        "Copy the state: `ema = copy.deepcopy(model)`, `ema.load_state_dict(model.state_dict())` (no `assign`).",
        "`opt_b.load_state_dict(copy.deepcopy(opt_a.state_dict()))`.",
    ),
    hazard=True,
)


def _fix(how: str, line) -> str:
    at = f"at line {line}" if line else "where the state is shared"
    if how == "load_state_dict":
        return f"Give the second optimizer a copy {at}: `opt.load_state_dict(copy.deepcopy(other.state_dict()))`."
    if how == "load_state_dict(assign=True)":
        return (f"Copy instead of assigning {at}: `load_state_dict(state_dict)` without `assign=True` copies into "
                "the module's own tensors (or build it with `copy.deepcopy(model)`).")
    return (f"Give the second module its own tensors {at}: `copy.deepcopy(model)`, or "
            "`ema.load_state_dict(model.state_dict())`, instead of assigning the parameters.")


def explain(ev: Evidence, hazard: dict):
    kept = hazard.get("kept") or {}
    writes = hazard.get("writes") or []
    if len(writes) < 2:
        return None
    first, other = writes[0], writes[1]
    kfile, kline, how = kept.get("file"), kept.get("line"), kept.get("op") or "assignment"
    kcode = code_at(kfile, kline)
    tid = hazard.get("tensor")
    n = len(hazard.get("tensors") or [tid])
    what = hazard.get("owner") or "state"
    source = hazard.get("source") or "another object's state"
    more = f" (and {n - 1} more tensor(s) shared the same way)" if n > 1 else ""
    made = {"load_state_dict": "`Optimizer.load_state_dict` keeps the given state tensors as they are",
            "load_state_dict(assign=True)": "`load_state_dict(..., assign=True)` makes the module's parameters "
                                            "over the given tensors",
            }.get(how, "assigning a parameter of one module to another shares it")
    explanation = (
        f"Line {kline} (`{kcode}`) gave {what}{more} the memory of {source}: {made}, not a copy. "
        f"Line {first.get('line')} (`{code_at(first.get('file'), first.get('line'))}`) and line {other.get('line')} "
        f"(`{code_at(other.get('file'), other.get('line'))}`) both write that memory in place "
        f"({hazard.get('write_count') or 2} writes in all), each meant for its own object, so each update moves "
        "the other object's state and nothing raised."
    )
    return diagnosis(
        KIND,
        explanation=explanation,
        fix=_fix(how, kline),
        culprit=where(first.get("file"), first.get("line"), alias=first.get("alias")),
        tensor={"id": tid, "names": ev.tensor_names(tid), "version_at_save": None, "version_now": None},
        other_writes=[d for d in (where(other.get("file"), other.get("line"), alias=other.get("alias")),) if d],
        alias_chain=[d for d in (where(kfile, kline, what=f"shared by {how}: the same memory, not a copy"),) if d],
        evidence=[f"shared at line {kline} by {how}; written at lines "
                  + ", ".join(str(w.get("line")) for w in writes) + " through both objects"],
    ) | {"kept_at": where(kfile, kline, how=how)}
