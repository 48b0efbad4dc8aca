"""The `shared-state` kind: two objects meant to hold state of their own (a model and its EMA, two optimizers) hold it over the same memory, so each one's update moves the other.

The instrumentation records where the sharing was made (a parameter another live module holds, an
optimizer's state loaded without a copy) and the distinct program lines that then wrote the shared
memory in place; two writers make the hazard (see NOTE [Shared state] in instrument/sharedstate.py).
One writer makes it when the object given the tensors is a frozen copy: it still holds them and never
updated a tensor of its own, yet it changes at every write of its source (see NOTE [A frozen copy that
is not one]).
"""

from __future__ import annotations

from tensorscope.kinds._base import Evidence, Kind, diagnosis, where
from tensorscope.source import code_at

KIND = Kind(
    code="shared-state",
    title="Two objects that should hold their own state share its memory, so each one's update moves the other.",
    explanation=(
        "Assigning a module's parameter or buffer to another module (`ema.weight = model.weight`), "
        "`copy.copy(model)`, `load_state_dict(sd, assign=True)` and `Optimizer.load_state_dict` keep the given "
        "tensors instead of copying them. A model and its EMA, teacher or frozen reference, or two optimizers, "
        "then hold their state over the same memory: the optimizer step moves the EMA or the teacher with the "
        "model, and each `step()` updates the other optimizer's moments. Nothing raises: the teacher equals the "
        "student, the moments are updated twice."
    ),
    causes=(
        "`ema.weight = model.weight`, `teacher.bn.running_mean = student.bn.running_mean`, "
        "`teacher = copy.copy(student)`, or `ema.load_state_dict(model.state_dict(), assign=True)`.",
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
    if how == "module reused":
        return f"Give the second model its own copy of the module {at}: `copy.deepcopy(model.backbone)`."
    if how == "copy.copy":
        return f"Copy the tensors too {at}: `copy.deepcopy(model)` instead of `copy.copy(model)`."
    return (f"Give the second module its own tensors {at}: `copy.deepcopy(model)`, or "
            "`ema.load_state_dict(model.state_dict())`, instead of assigning the parameters "
            "(`.detach().clone()` for one tensor).")


def explain(ev: Evidence, hazard: dict):
    kept = hazard.get("kept") or {}
    writes = hazard.get("writes") or []
    frozen = hazard.get("frozen")
    if len(writes) < (1 if frozen else 2):
        return None
    first = writes[0]
    other = writes[1] if len(writes) > 1 else None
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
            "copy.copy": "`copy.copy` of a module copies its attribute dicts, not its tensors",
            "module reused": "a module registered in a second model is the same module, with the same tensors",
            }.get(how, "assigning a parameter or buffer of one module to another shares it")
    fline, fcode = first.get("line"), code_at(first.get("file"), first.get("line"))
    count = hazard.get("write_count") or (1 if frozen else 2)
    if frozen:
        happened = (
            f"`{frozen}` never updates a tensor of its own, yet line {fline} (`{fcode}`) writes that memory "
            f"in place through the source ({count} write(s) in all): the frozen copy changes with every update "
            "of the model it was copied from, and nothing raised."
        )
        evidence = f"shared at line {kline} by {how}; written only at line {fline}, through the source"
    else:
        happened = (
            f"Line {fline} (`{fcode}`) and line {other.get('line')} "
            f"(`{code_at(other.get('file'), other.get('line'))}`) both write that memory in place "
            f"({count} writes in all), each meant for its own object, so each update moves "
            "the other object's state and nothing raised."
        )
        evidence = (f"shared at line {kline} by {how}; written at lines "
                    + ", ".join(str(w.get("line")) for w in writes) + " through both objects")
    explanation = f"Line {kline} (`{kcode}`) gave {what}{more} the memory of {source}: {made}, not a copy. " + happened
    return diagnosis(
        KIND,
        explanation=explanation,
        fix=_fix(how, kline),
        culprit=where(first.get("file"), fline, alias=first.get("alias")),
        tensor={"id": tid, "names": ev.tensor_names(tid), "version_at_save": None, "version_now": None},
        other_writes=[d for d in (where(other.get("file"), other.get("line"), alias=other.get("alias")),)
                      if d] if other else [],
        alias_chain=[d for d in (where(kfile, kline, what=f"shared by {how}: the same memory, not a copy"),) if d],
        evidence=[evidence],
    ) | {"kept_at": where(kfile, kline, how=how)}
