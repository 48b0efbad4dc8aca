"""The `hook-holds-tensors` kind (a hazard): a hook (or a closure) keeps tensors of every step alive."""

from __future__ import annotations

from tensorscope.kinds import _retention
from tensorscope.kinds._base import Kind

KIND = Kind(
    code='hook-holds-tensors',
    title='A hook (or a closure) keeps tensors of every step alive.',
    explanation=(
        'A forward hook, a tensor hook or a closure that stores what it sees keeps those tensors (and their '
        'graphs) alive for as long as the hook is registered and its list is not cleared. A hook that is never '
        'removed keeps its captures forever.'
    ),
    causes=(
        'A forward hook that appends each output to a list.',
        'A `register_hook` closure that collects gradients in a list never cleared.',
    ),
    fixes=(
        'Remove the hook when done: `handle.remove()`.',
        'Clear what the hook collects each step, and store `.detach()`ed values.',
    ),
    hazard=True,
)


def explain(ev, hazard: dict) -> dict:
    """The hazard from a retention finding (see NOTE [The retaining line] in kinds/_retention.py)."""
    return _retention.explain(ev, hazard, KIND)
