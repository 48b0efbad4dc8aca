"""The `container-grows` kind (a hazard): a container or cache grows every step and is never cleared."""

from __future__ import annotations

from tensorscope.kinds import _retention
from tensorscope.kinds._base import Kind

KIND = Kind(
    code='container-grows',
    title='A container or cache grows every step and is never cleared.',
    explanation=(
        'A list, dict or cache that receives tensors every step and is never cleared or bounded grows without limit. Reported when it grows by at least 64 KB per step (a list of `.item()` floats or of small detached values is not).'
    ),
    causes=(
        'A cache keyed by something new every step.',
        'A list of per-step tensors kept for the whole run.',
    ),
    fixes=(
        'Bound the cache (an LRU of fixed size) or clear it each epoch.',
        'Keep Python numbers (for GPU tensors, `.cpu()` copies) of only what is needed, and `del` the rest.',
    ),
    hazard=True,
)


def explain(ev, hazard: dict) -> dict:
    """The hazard from a retention finding (see NOTE [The retaining line] in kinds/_retention.py)."""
    return _retention.explain(ev, hazard, KIND)
