"""The `view-inplace` kind: a view was modified in place in a way autograd cannot record correctly."""

from __future__ import annotations

from tensorscope.kinds._base import Kind

KIND = Kind(
    code='view-inplace',
    title='A view was modified in place in a way autograd cannot record correctly.',
    explanation=(
        "When a view is written in place autograd rewrites the view's and its base's grad_fn. It "
        'cannot do so for a view that is one of several outputs of an op (unbind, split, chunk), for '
        'a view created in no_grad or inference mode and written with grad enabled, or for a view '
        'returned by a custom Function, so the write is refused.'
    ),
    causes=(
        (
            'Writing in place to an output of `unbind`, `split` or `chunk` (or to their base while such '
            'an output is still used).'
        ),
        'Taking a view under `torch.no_grad()` and writing to it, or its base, outside.',
        (
            'Writing in place to a tensor returned by a custom `torch.autograd.Function` that returned a '
            'view of (or exactly) its input.'
        ),
    ),
    fixes=(
        'Replace the in-place op with the out-of-place one.',
        'Clone the view before writing: `v = v.clone()`.',
        'Take the view and do the write both inside, or both outside, the no_grad block.',
        'Clone the output of the custom Function (in its forward or right after apply).',
    ),
)


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/simple.py)."""
    from tensorscope.analysis import simple

    return simple.view_inplace(ev)
