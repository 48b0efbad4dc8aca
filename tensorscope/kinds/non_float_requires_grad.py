"""The `non-float-requires-grad` kind: requires_grad was asked for on a tensor whose dtype is not floating point or complex."""

from __future__ import annotations

import re

from tensorscope.kinds._base import Kind, Pattern, w

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


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/simple.py)."""
    from tensorscope.analysis import simple

    return simple.non_float_requires_grad(ev)
