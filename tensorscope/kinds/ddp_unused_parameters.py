"""The `ddp-unused-parameters` kind: distributedDataParallel waited for gradients of parameters that the previous iteration did not use."""

from __future__ import annotations

from tensorscope.kinds._base import Kind

KIND = Kind(
    code='ddp-unused-parameters',
    title=(
        'DistributedDataParallel waited for gradients of parameters that the previous iteration did '
        'not use.'
    ),
    explanation=(
        "DDP's reducer expects a gradient for every parameter it reduces, in every iteration, and "
        "finishes the iteration's all-reduce when the last one arrives. Parameters that took no part "
        "in computing the loss got no gradient, so the previous iteration's reduction never finished "
        'and the next forward refused to start.'
    ),
    causes=(
        (
            'A submodule created in `__init__` but never called in `forward` (or called only on some '
            'iterations: a data-dependent branch).'
        ),
        'An output of `forward` that does not contribute to the loss.',
        '`static_graph=True` with a graph that changes between iterations.',
    ),
    fixes=(
        (
            'Remove the unused submodule, or freeze it before wrapping: `module.requires_grad_(False)` '
            '(DDP skips parameters that do not require grad).'
        ),
        (
            'Pass `find_unused_parameters=True` to `DistributedDataParallel` (it costs a graph traversal '
            'per iteration).'
        ),
        'Make every output of `forward` take part in the loss.',
    ),
)


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/ddp.py)."""
    from tensorscope.analysis import ddp

    return ddp.unused_parameters(ev)
