"""The `non-leaf-requires-grad` kind: requires_grad was changed on a tensor computed by autograd-recorded ops."""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds._base import Kind, Pattern, diagnosis, opening, statement, w, where

KIND = Kind(
    code="non-leaf-requires-grad",
    title="requires_grad was changed on a non-leaf tensor (one computed from tensors that require grad).",
    explanation=(
        "Only leaf tensors (created by the user, not computed by recorded ops) own their requires_grad "
        "flag. A non-leaf's flag follows from its inputs, so setting it (to False in particular) is refused."
    ),
    causes=(
        "`h.requires_grad = False` (or `h.requires_grad_(False)`) on an activation or loss to stop "
        "gradients.",
        "`requires_grad_()` on an output of a model to get its `.grad`.",
    ),
    fixes=(
        "Cut the graph out of place instead: `h = h.detach()`.",
        "To read the gradient of a non-leaf, call `h.retain_grad()` before backward().",
    ),
)

PATTERNS = (Pattern(w("you can only change requires_grad flags of leaf variables.")
                    + r"(?:\s+" + w("If you want to use a computed variable in a subgraph that doesn't require "
                                   "differentiation use var_no_grad = var.detach().") + r")?"),)


def _target(code: str):
    """``(name, value)`` of ``X.requires_grad = V`` or ``X.requires_grad_(V)`` in the line."""

    stmt = statement(code)
    if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Attribute) \
            and stmt.targets[0].attr == "requires_grad":
        return source.text(stmt.targets[0].value), source.text(stmt.value)
    for node in ast.walk(stmt) if stmt is not None else ():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_":
            value = source.text(node.args[0]) if node.args else "True"
            return source.text(node.func.value), value
    return None, None


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    name, value = _target(code)
    what = f"`{name}`" if name else "the tensor"
    text = (f"Line {line} (`{code}`) changes requires_grad of {what}, which is not a leaf: it was computed by "
            "recorded ops from tensors that require grad, so its flag follows from theirs and cannot be set.")
    simple = name is not None and statement(name) is not None and isinstance(statement(name).value, ast.Name)
    if value in ("False", "0") and simple:
        fix = f"To stop gradients here, replace the line with `{name} = {name}.detach()`."
    elif name and simple:
        fix = (f"`{name}` already requires grad through its inputs: drop the line; to read `{name}.grad` after "
               f"backward(), call `{name}.retain_grad()` instead; to make it a new leaf, "
               f"`{name} = {name}.detach().requires_grad_()`.")
    else:
        fix = ("Cut the graph out of place (`x = x.detach()`) instead of setting requires_grad, or call "
               "`x.retain_grad()` to keep a non-leaf's gradient.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=name),
                     evidence=["the requires_grad setter raised on a non-leaf tensor"])
