"""The `leaf-inplace` kind: a leaf tensor that requires grad (or a view of it) was modified in place."""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds import _intent
from tensorscope.kinds._base import Evidence, Kind, Pattern, created_at, diagnosis, name_of, site, tensor_of, w, where
from tensorscope.kinds._fixes import clone_of, rewrite_or_clone

KIND = Kind(
    code='leaf-inplace',
    title='A leaf tensor that requires grad (or a view of it) was modified in place.',
    explanation=(
        'A leaf that requires grad, such as a parameter, is where gradients are accumulated; autograd'
        ' has no node to record an in-place change to it. Writing to it, or to a view of it, in grad '
        'mode is therefore refused.'
    ),
    causes=(
        (
            'Initialising or updating a parameter in place in grad mode: `w.add_(...)`, `w[0] = ...`, '
            '`w.uniform_()`.'
        ),
        'A hand-written optimizer step `w -= lr * w.grad` outside `torch.no_grad()`.',
    ),
    fixes=(
        'Do the write under `with torch.no_grad():` when it is an update, not part of the model.',
        'Use the out-of-place op and a new name: `w2 = w * 2`.',
        'Clone first when the modified copy should be differentiable: `w2 = w.clone(); w2[0] = 0`.',
    ),
)


PATTERNS = (Pattern(r"[Aa]\s+(?P<view>" + w("view of a") + r"\s+)?" + w("leaf Variable that requires grad")
                    + r"\s+(?:is\s+being|has\s+been)\s+" + w("used in an in-place operation") + r"\.?",
                    lambda m: {"view_of_leaf": bool(m["view"])}),)


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    if f.get("view_of_leaf"):
        return None, ["The tensor written is a view of a leaf that requires grad (e.g. `w[0] = ...` on a "
                      "parameter)."], ["Do the write under `torch.no_grad()`: `with torch.no_grad(): w[0] = 0.`"]
    return None, ["The tensor written is itself a leaf that requires grad (a parameter or a tensor made "
                  "with requires_grad=True)."], []


_UPDATE_OPS = {"isub", "iadd", "imul", "itruediv", "sub_", "add_", "mul_", "div_", "addcmul_", "addcdiv_",
               "copy_", "lerp_"}
_INIT_OPS = {"setitem", "fill_", "zero_", "uniform_", "normal_", "copy_", "clamp_", "clamp_min_", "clamp_max_",
             "masked_fill_", "index_fill_", "scatter_", "bernoulli_", "random_", "exponential_"}


def _subscript(code: str):
    try:
        node = ast.parse(code).body[0]
    except (SyntaxError, IndexError, ValueError):
        return None
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
        return node.targets[0]
    return None


def explain(ev: Evidence) -> dict | None:
    """The diagnosis from the written leaf: an update or initialisation (under no_grad) or part of the computation (out of place)."""
    file, line, f = site(ev)
    if not line:
        return None
    op, alias = f.get("op") or "", f.get("alias") or name_of(ev, f)
    code = source.code(file, line)
    view = bool((ev.parsed.fields if ev.parsed is not None else {}).get("view_of_leaf")) or bool(f.get("base"))
    lib = f.get("library")
    created = created_at(ev, f.get("base") if view and f.get("base") else f.get("tensor"))
    what = f"`{alias}` is a view of a leaf tensor that requires grad" if view and op != "setitem" else (
        f"`{alias}` is a leaf tensor that requires grad")
    if op == "setitem" and view:
        what = f"`{source.text(_subscript(code)) or alias}` is a view of `{alias}`, a leaf tensor that requires grad"
    if created:
        what += f" (created at line {created['line']}: `{source.code(created['file'], created['line'])}`)"
    elif alias.endswith((".weight", ".bias")) or "param" in alias:
        what += " (a module parameter)"
    text = (f"{what}. Line {line} (`{code}`) writes into it in place"
            + (f" (inside {lib})" if lib else "") + " while grad mode is on; autograd cannot record a change "
            "to a leaf, so the write is refused.")
    update = ".grad" in code or op in _UPDATE_OPS and "grad" in code
    init = op in _INIT_OPS or update
    param = _intent.parameter_written(ev, f.get("tensor"), alias) if init and not lib else None
    if param is not None and _intent.forward_pending(ev):
        # under no_grad alone the write would break the pending backward (NOTE [A fix keeps the write's intent])
        fix = _intent.move_after_step(ev, param, file, line, f.get("seq"))
    elif init:
        fix = (f"This is a parameter update or initialisation: do it without recording, "
               f"`with torch.no_grad(): {code}`")
        if "emb" in alias.lower() and op == "setitem":
            fix += " (for an embedding padding row, `nn.Embedding(..., padding_idx=0)` keeps it zero for you)"
        fix += "; or let an optimizer do the update (`torch.optim.SGD(...).step()`)." if update else "."
    else:
        fix = (f"If this is part of the computation, do it out of place so the leaf stays intact: "
               f"`{rewrite_or_clone(code, op, alias)}` (or clone first: {clone_of(alias)}); if it is meant "
               f"as an update of the leaf, wrap it in `with torch.no_grad():`.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=alias),
                     tensor=tensor_of(ev, f.get("tensor"), f.get("names")),
                     evidence=["the in-place write raised inside its wrapper", "tensor facts: leaf, requires_grad"])
