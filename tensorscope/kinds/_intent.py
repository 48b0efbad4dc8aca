"""Fixes that keep what a write to a parameter was for (torch-free).

# NOTE [A fix keeps the write's intent]
A write into a parameter between the forward pass and backward() -- `p.data.clamp_(-c, c)` (weight
clipping), a renormalisation, a projection -- is meant to change the parameter. Writing into a clone
would make the error or the hazard go away and silently drop the clipping; an out-of-place
`p = p.clamp(...)` rebinds a name (or, on a module attribute, raises: a Parameter cannot be replaced
by a Tensor). What keeps both the intent and correct gradients is to make the same write where no
graph holds the old values: after the optimizer step (or before the forward pass), under
`torch.no_grad()`, through the parameter itself. The evidence decides: the written memory is a
parameter's (a module's, an optimizer's, or any leaf that requires grad), and the write
is the program's own (not inside torch.optim or torch.nn). The step's line is the optimizer's first
recorded write into that parameter after this one (else any); without one, backward's line.
"""

from __future__ import annotations

import re

from tensorscope.kinds._base import Evidence
from tensorscope.source import code_at


def _held(ev: Evidence) -> set:
    return {p for o in ev.doc.get("optimizers") or [] for p in o.get("parameters") or []}


def parameter_written(ev: Evidence, tid: str | None, alias: str | None = None) -> dict | None:
    """The parameter whose storage tensor ``tid`` is on (``tid`` itself, a view, a ``.data`` alias), or
    None. A parameter: a module's or one an optimizer updates; or a leaf that requires grad written
    through its own name (``w.data.mul_(0.5)`` on `w = torch.randn(..., requires_grad=True)`; not
    ``tmp.mul_(2)`` on `tmp = y.detach()`, which is part of a computation)."""
    t = ev.by_id.get(tid) if tid else None
    if t is None or not t.get("storage"):
        return None
    held = _held(ev)
    same = [p for p in ev.doc["tensors"] if p.get("storage") == t["storage"]]
    found = next((p for p in same if p.get("role") == "parameter" or p["id"] in held), None)
    if found is not None:
        return found
    root = re.sub(r"(\.data|\.detach\(\))+$", "", alias or "")
    return next((p for p in same if p.get("is_leaf") and p.get("requires_grad") and root in p["names"]), None)


def forward_pending(ev: Evidence) -> bool:
    """Whether a forward pass saved tensors for a backward() that has not run yet (the recorded events;
    a saved tensor that is a parameter's view may be left out of the report, so any saved tensor counts)."""
    pending = False
    for e in ev.doc.get("events") or []:
        if e.get("kind") == "backward":
            pending = False
        elif e.get("kind") == "saved":
            pending = True
    return pending


def _optimizer_step(ev: Evidence, param: dict, after_seq) -> dict | None:
    """The first write inside torch.optim into the parameter's storage after ``after_seq`` (else any)."""
    steps = [e for e in ev.doc.get("events") or [] if e.get("kind") == "write"
             and "torch/optim" in (e.get("library") or "")
             and (ev.by_id.get(e.get("tensor")) or {}).get("storage") == param.get("storage")]
    return next((e for e in steps if after_seq is None or e.get("seq", 0) > after_seq), steps[0] if steps else None)


def without_data(code: str) -> str:
    """The same write through the parameter itself: `p.data.clamp_(-1, 1)` -> `p.clamp_(-1, 1)`,
    `p.detach().mul_(2)` -> `p.mul_(2)`, `p.data = p.data.clamp(-1, 1)` -> `p.copy_(p.clamp(-1, 1))`."""
    m = re.fullmatch(r"\s*([\w.\[\]]+?)\.data\s*=\s*(.+?)\s*", code or "")
    if m:
        return f"{m[1]}.copy_({without_data(m[2])})"
    return re.sub(r"(\.data\b|\.detach\(\))(?=\s*[.\[])", "", (code or "").strip())


def _line(file: str | None, line: int, other: str | None) -> str:
    """``line 16``, or ``main.py:16`` when it is in another file than ``other``."""
    if not file or file == other:
        return f"line {line}"
    return f"{file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}"


def move_after_step(ev: Evidence, param: dict, file: str | None, line: int | None, seq=None,
                    backward: dict | None = None) -> str:
    """The fix for the program's write at ``file:line`` into ``param`` while a graph still needs its old
    values (see NOTE [A fix keeps the write's intent]); ``backward``: the backward call's place."""
    code = code_at(file, line)
    write = without_data(code)
    name = (param.get("names") or [None])[0]
    step = _optimizer_step(ev, param, seq)
    optimizer = next((o["name"] for o in ev.doc.get("optimizers") or [] if param["id"] in (o.get("parameters") or [])
                      and o.get("name")), None)
    back = backward or {}
    if step is not None:
        after = (f"after {_line(step.get('file'), step['line'], file)} "
                 f"(`{step.get('code') or code_at(step.get('file'), step['line'])}`)")
    else:
        after = "after backward()" + (f" ({_line(back.get('file'), back['line'], file)})" if back.get("line") else "")
        after += f" and `{optimizer}.step()`" if optimizer else ""
    there = (step or back).get("file")
    # the write is in a function the program calls from another file: the call moves
    call = " (the write is inside a function: move the call that runs it)" if there and there != file else ""
    noun = "parameter" if param.get("role") == "parameter" or param["id"] in _held(ev) else "leaf tensor"
    what = f"the {noun} {name}" if name else f"a {noun}"  # not in backticks: `critic.2.weight` is no Python
    return (f"Line {line} (`{code}`) changes {what} between a forward pass and its backward(), which "
            "needs the values the forward pass used. To keep the change (a clip, a renormalisation) with "
            f"correct gradients, make the write {after} (or before the forward pass), under no_grad: "
            f"`with torch.no_grad(): {write}`{call}. Writing into a clone instead would silently drop the "
            "change.")
