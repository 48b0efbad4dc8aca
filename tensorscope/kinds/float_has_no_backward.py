"""The `float-has-no-backward` kind: backward() was called on a Python number (a loss turned by ``.item()``)."""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds._base import Kind, Pattern, diagnosis, last_event, opening, statement, w, where

KIND = Kind(
    code="float-has-no-backward",
    title="backward() was called on a Python number instead of a tensor (the loss went through .item()).",
    explanation=(
        "`tensor.item()` returns a plain Python float (or int) with no graph; calling `.backward()` on it "
        "fails. The loss must stay a tensor until backward()."
    ),
    causes=(
        "`loss = criterion(...).item()` or `loss = loss.item()` before `loss.backward()`.",
        "A function returning `.item()` values where the caller expects the loss tensor (e.g. swapped "
        "return values).",
        "A loss that is a plain `0.0` on some path (no term added).",
    ),
    fixes=(
        "Keep the tensor for backward and take `.item()` only for logging: `loss.backward(); "
        "total += loss.item()`.",
    ),
)

PATTERNS = (Pattern(r"'(?P<type>float|int|bool)'\s+" + w("object has no attribute 'backward'"),
                    lambda m: {"type": m["type"]}),)


def _backward_receiver(code: str):
    stmt = statement(code)
    for node in ast.walk(stmt) if stmt is not None else ():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward":
            return node.func.value
    return None


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    recv = _backward_receiver(code)
    name = ast.unparse(recv) if recv is not None else None
    text = f"Line {line} (`{code}`) calls backward() on a Python number, not a tensor"
    culprit = where(file, line, alias=name)
    made = None
    if isinstance(recv, ast.Name):
        stmt = source.definition(file, line, recv.id)
        if stmt is not None and ".item()" in ast.unparse(stmt):
            made = (file, stmt.lineno)
    if made is None:
        e = last_event(ev, "copy", ("item",))
        if e is not None and e.get("line"):
            made = (e["file"], e["line"])
    if made is not None:
        mcode = source.code(*made)
        text += f": `{name or 'it'}` comes from `.item()` at line {made[1]} (`{mcode}`)"
        culprit = where(made[0], made[1], alias=name)
    text += ". `.item()` returns a plain float without a graph."
    target = f"`{name}`" if name else "the loss"
    fix = (f"Keep {target} a tensor until backward(): remove `.item()` where it is made and take `.item()` only "
           f"for logging after backward (e.g. `{name or 'loss'}.backward()` then "
           f"`total += {name or 'loss'}.item()`).")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=culprit, backward=where(file, line),
                     evidence=["backward() was looked up on a Python number"])
