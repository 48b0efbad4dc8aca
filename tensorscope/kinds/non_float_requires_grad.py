"""The `non-float-requires-grad` kind: requires_grad was asked for on a tensor whose dtype is not floating point or complex."""

from __future__ import annotations

from tensorscope.kinds._base import Kind

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


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/simple.py)."""
    from tensorscope.analysis import simple

    return simple.non_float_requires_grad(ev)
