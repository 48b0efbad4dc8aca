"""The `double-backward-unsupported` kind: a second differentiation through a once_differentiable backward."""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds._base import Kind, Pattern, diagnosis, opening, user_files, w, where

KIND = Kind(
    code="double-backward-unsupported",
    title="A gradient computed by a backward marked @once_differentiable was differentiated again.",
    explanation=(
        "A custom Function whose backward is decorated with `@once_differentiable` computes its gradient "
        "without recording it. Autograd marks that gradient so that differentiating it again "
        "(create_graph=True and a second backward, e.g. a gradient penalty or a Hessian) fails."
    ),
    causes=(
        "A gradient penalty or higher-order derivative through a custom Function (or an extension op) whose "
        "backward is `@once_differentiable`.",
        "`torch.autograd.grad(..., create_graph=True)` followed by backward through such a gradient.",
    ),
    fixes=(
        "Write the Function's backward with differentiable torch ops and drop `@once_differentiable`.",
        "Do not differentiate the gradient: drop `create_graph=True` or the second backward.",
    ),
)

PATTERNS = (Pattern(w("trying to differentiate twice a function that was marked with @once_differentiable")),)


def once_differentiable_backwards(ev) -> list:
    """Classes in the program's files whose backward is decorated with once_differentiable."""

    out = []
    for file in user_files(ev):
        tree = source.tree(file)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.FunctionDef) and node.name == "backward":
                if any("once_differentiable" in source.text(d) for d in node.decorator_list):
                    out.append((node, file))
    return out


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    marked = once_differentiable_backwards(ev)
    culprit = where(file, line)
    text = (f"Line {line} (`{code}`) differentiates a gradient that came out of a backward marked "
            "`@once_differentiable`; that backward did not record its own computation, so it cannot be "
            "differentiated again.")
    if marked:  # the decorator is what to change: it is the culprit, the raising line the backward
        node, mfile = marked[0]
        deco = next(d.lineno for d in node.decorator_list if "once_differentiable" in source.text(d))
        culprit = where(mfile, deco)
        text += f" The marked backward is at line {deco}."
    fix = ("Remove `@once_differentiable` from that backward and compute the gradient with differentiable torch "
           "ops (they are recorded under `create_graph=True`), or do not differentiate the gradient: drop "
           "`create_graph=True` from the first backward/`autograd.grad`.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=culprit, backward=where(file, line),
                     evidence=["autograd raised while differentiating a once_differentiable gradient"])
