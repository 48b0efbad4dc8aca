"""The `resize-requires-grad` kind: resize_ was called on a tensor that requires grad."""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds._base import Evidence, Kind, Pattern, diagnosis, name_of, site, tensor_of, w, where

KIND = Kind(
    code='resize-requires-grad',
    title='resize_ was called on a tensor that requires grad.',
    explanation=(
        "`resize_` changes a tensor's shape and storage in place. Autograd has no backward for that, "
        'so it is refused for tensors that require grad.'
    ),
    causes=(
        '`x.resize_(...)` or `x.resize_as_(...)` on a parameter or on a tensor computed from one.',
    ),
    fixes=(
        'Use an out-of-place op: `reshape`, `view`, `torch.cat`, `F.pad` or a new tensor.',
        'Resize only tensors that need no gradient, e.g. a buffer created under `torch.no_grad()`.',
    ),
)


PATTERNS = (Pattern(w("cannot resize variables that require grad")),)


def explain(ev: Evidence) -> dict | None:
    """The diagnosis from the resize_() call: build a new tensor and copy the old values in."""
    file, line, f = site(ev)
    if not line:
        return None
    alias = f.get("alias") or name_of(ev, f)
    code = source.code(file, line)
    stmt = source.statement_at(file, line)
    call = next((n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr in ("resize_", "resize_as_")), None) if stmt is not None else None
    size = ", ".join(source.text(a) for a in call.args) if call is not None else "..."
    text = (f"Line {line} (`{code}`) resizes `{alias}` in place, but `{alias}` requires grad: autograd cannot "
            "track a change of shape, so resize_() is refused on tensors that require grad.")
    fix = (f"Build a new tensor and copy the old values in, e.g. `new = {alias}.detach().new_zeros({size}); "
           f"new[:{alias}.shape[0]] = {alias}.detach(); {alias} = new.requires_grad_()` (then hand the new tensor "
           "to the module/optimizer), or `torch.cat` the old and new rows.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=alias),
                     tensor=tensor_of(ev, f.get("tensor"), f.get("names")), evidence=["resize_() raised inside its wrapper"])
