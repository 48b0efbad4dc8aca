"""The `other` kind: a known PyTorch error that is not one of the backward-failure kinds."""

from __future__ import annotations

from tensorscope.kinds._base import Kind

KIND = Kind(
    code='other',
    title='A known PyTorch error that is not one of the backward-failure kinds.',
    explanation=(
        'tensorscope recognises this error text, but it is not one of the backward-failure kinds. The'
        ' decoded fields (`reason` first) say which error it is.'
    ),
    causes=(
        'An `as_strided` view larger than its storage.',
        '`expand` of a dimension whose size is not 1.',
        'Inference-mode tensors used with autograd.',
    ),
    fixes=(
        'Read the decoded fields and fix the shapes or strides they name.',
    ),
)


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/simple.py)."""
    from tensorscope.analysis import simple

    return simple.other(ev)
