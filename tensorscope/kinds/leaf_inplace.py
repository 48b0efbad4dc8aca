"""The `leaf-inplace` kind: a leaf tensor that requires grad (or a view of it) was modified in place."""

from __future__ import annotations

from tensorscope.kinds._base import Kind, Pattern, w

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


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/simple.py)."""
    from tensorscope.analysis import simple

    return simple.leaf_inplace(ev)
