"""The `view-pins-storage` kind (a hazard): a small view keeps a much larger storage alive."""

from __future__ import annotations

from tensorscope.kinds import _retention
from tensorscope.kinds._base import Kind

KIND = Kind(
    code='view-pins-storage',
    title='A small view keeps a much larger storage alive.',
    explanation=(
        "A view (a slice, a row, `x[0]`, `narrow`, `select`) shares its base's storage: as long as the view lives, the whole storage lives, however few bytes the view reaches. Keeping slices of each batch keeps every batch alive, and `torch.save` of a view writes its whole storage. Reported when the storage is at least 4 times the view's bytes and at least 1 MB."
    ),
    causes=(
        'Keeping a row or slice of a large batch: `firsts.append(batch[0])`.',
        "`torch.save(x[:10], path)` (writes all of x's storage).",
    ),
    fixes=(
        'Keep a copy of the slice: `firsts.append(batch[0].clone())`.',
        'Save a copy: `torch.save(x[:10].clone(), path)`.',
    ),
    hazard=True,
)


def explain(ev, hazard: dict) -> dict:
    """The hazard from a retention finding (see NOTE [The retaining line] in kinds/_retention.py)."""
    return _retention.explain(ev, hazard, KIND)
