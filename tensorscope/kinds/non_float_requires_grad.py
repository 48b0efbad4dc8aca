"""The `non-float-requires-grad` kind: requires_grad was asked for on a tensor whose dtype is not floating point or complex."""

from __future__ import annotations

import ast
import re

from tensorscope import source
from tensorscope.kinds._base import Evidence, Kind, Pattern, created_at, diagnosis, site, tensor_of, w, where

KIND = Kind(
    code='non-float-requires-grad',
    title='requires_grad was asked for on a tensor whose dtype is not floating point or complex.',
    explanation=(
        'Gradients are only defined for floating-point and complex tensors. An integer or bool tensor'
        ' (indices, labels, masks) cannot require grad.'
    ),
    causes=(
        '`torch.tensor([1, 2], requires_grad=True)`: integer literals give an int64 tensor.',
        '`requires_grad_()` or `requires_grad = True` on an index, label or mask tensor.',
        '`nn.Parameter` wrapping an integer tensor.',
    ),
    fixes=(
        (
            'Create it as floating point: `torch.tensor([1., 2.], requires_grad=True)` or '
            '`dtype=torch.float32`.'
        ),
        'Convert first: `x = x.float().requires_grad_()`.',
        'Leave integer tensors (indices, labels, masks) without requires_grad.',
    ),
)


def _decode(m: re.Match) -> dict:
    # Which entry point printed which wording was measured on 2.13; older releases differ.
    if m["o"] == "O":
        via = "factory"
    else:
        via = "requires_grad-setter" if m["complex"] else "requires_grad_"
    return {"via": via, "complex_allowed": bool(m["complex"])}


PATTERNS = (
    Pattern(r"(?P<o>[Oo])nly\s+" + w("Tensors of floating point") + r"\s+(?P<complex>and\s+complex\s+)?"
            + w("dtype can require gradients"), _decode),
    Pattern(w("data set to a tensor that requires gradients must be floating point or complex dtype"),
            lambda m: {"via": "data-setter", "complex_allowed": True}),
)

_FIX = {
    "factory": "Create it as floating point: `torch.tensor([1., 2.], requires_grad=True)`, "
               "`dtype=torch.float32`, or `nn.Parameter(t.float())`.",
    "requires_grad_": "Convert before asking for gradients: `x = x.float().requires_grad_()`.",
    "requires_grad-setter": "Convert before setting the flag: `x = x.float(); x.requires_grad = True`.",
    "data-setter": "Assign floating-point data (`x.data = y.float()`), or better "
                   "`with torch.no_grad(): x.copy_(y)`.",
}


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    fix = _FIX.get(f.get("via"))
    return None, [], [fix] if fix else []


def _float_literals(call) -> str | None:
    """``torch.tensor([1, 2, 3], requires_grad=True)`` with float literals, or None."""
    if not call.args or not isinstance(call.args[0], (ast.List, ast.Tuple)):
        return None
    changed = False
    for n in ast.walk(call.args[0]):
        if isinstance(n, ast.Constant) and type(n.value) is int:
            n.value = float(n.value)
            changed = True
    return source.text(call) if changed else None


def explain(ev: Evidence) -> dict | None:
    """The diagnosis from where the integer tensor was created, or asked to require grad."""
    file, line, f = site(ev)
    if not line:
        return None
    code = source.code(file, line)
    tid = f.get("tensor")
    info = ev.by_id.get(tid) or {}
    dtype = info.get("dtype")
    name = (f.get("names") or [None])[0] or source.bound_name(file, line) or f.get("alias")
    if f.get("where") == "create" or not tid:
        stmt = source.statement_at(file, line)
        call = next((n for n in ast.walk(stmt) if isinstance(n, ast.Call) and any(
            k.arg == "requires_grad" for k in n.keywords)), None) if stmt is not None else None
        text = (f"Line {line} (`{code}`) creates a tensor with requires_grad=True, but its values are integers, so "
                "its dtype is an integer type; only floating point (and complex) tensors can require gradients.")
        fixed = _float_literals(call) if call is not None else None
        fix = (f"Write float literals: `{fixed}`, or pass `dtype=torch.float32` at line {line}." if fixed else
               f"Create it as floating point at line {line}: add `dtype=torch.float32` (or call `.float()` before "
               "requiring grad).")
        name = source.bound_name(file, line) or name
    else:
        created = created_at(ev, tid)
        origin = f", created at line {created['line']} (`{source.code(created['file'], created['line'])}`)" if created else ""
        text = (f"Line {line} (`{code}`) asks `{name}` to require grad, but `{name}` has dtype {dtype or 'integer'}"
                f"{origin}; only floating point (and complex) tensors can require gradients.")
        lname = (name or "").lower()
        if any(w in lname for w in ("label", "target", "idx", "index", "indices", "mask", "token", "class")):
            fix = (f"`{name}` holds integer labels/indices, which need no gradient: remove the requires_grad call at "
                   f"line {line}. If you really want a trainable tensor, make it float: `{name} = {name}.float()` "
                   "before requiring grad.")
        else:
            fix = (f"Make it floating point before requiring grad: `{name} = {name}.float().requires_grad_()` "
                   "(or create it with `dtype=torch.float32`).")
    return diagnosis(KIND, explanation=text, fix=fix,
                     culprit=where(file, line, alias=name), tensor=tensor_of(ev, tid, [name] if name else None),
                     evidence=[f"dtype: {dtype}" if dtype else "integer values at creation"])
