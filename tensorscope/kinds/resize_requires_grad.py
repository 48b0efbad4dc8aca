"""The `resize-requires-grad` kind: resize_ was called on a tensor that requires grad."""

from __future__ import annotations

from tensorscope.kinds._base import Kind, Pattern, w

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


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/simple.py)."""
    from tensorscope.analysis import simple

    return simple.resize_requires_grad(ev)
