"""The `inplace-modified-saved-tensor` kind: a tensor saved for backward was modified in place before backward() used it."""

from __future__ import annotations

from tensorscope.kinds._base import Kind

KIND = Kind(
    code='inplace-modified-saved-tensor',
    title='A tensor saved for backward was modified in place before backward() used it.',
    explanation=(
        'Autograd saves some inputs and outputs of an op (for example the result of sigmoid, exp or '
        'tanh, or the operands of mm) to compute gradients later. Every in-place write bumps the '
        "tensor's version counter; at backward time the saved tensor's version no longer matched the "
        'version recorded when it was saved, so its gradient would have been computed from the wrong '
        'values.'
    ),
    causes=(
        (
            'An in-place op (`x.add_()`, `x += ...`, `x[i] = ...`, `x.zero_()`) on a tensor that an '
            'earlier op saved for backward.'
        ),
        (
            'A write through an alias that shares the version counter: a view, a slice, or `.detach()` of'
            ' the saved tensor.'
        ),
        (
            'An activation module with `inplace=True` (`nn.ReLU(inplace=True)`, '
            '`nn.Dropout(inplace=True)`) overwriting a tensor the previous op saved.'
        ),
        (
            '`optimizer.step()` updating parameters in place between the forward pass and a later '
            'backward() that still needs the old parameter values.'
        ),
    ),
    fixes=(
        'Clone before the write: `y = y.clone()` and modify the clone.',
        'Use the out-of-place op: `x = x + 1` instead of `x += 1` or `x.add_(1)`.',
        'Pass `inplace=False` to activation and dropout modules.',
        'Move `optimizer.step()` after the last backward() that uses the current graph.',
    ),
)


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/inplace.py)."""
    from tensorscope.analysis import inplace

    return inplace.explain(ev)
