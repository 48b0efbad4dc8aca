"""The `graph-kept-alive` kind (a hazard): a name that outlives each step keeps that step's autograd graph alive, so memory grows every step."""

from __future__ import annotations

from tensorscope.kinds import _retention
from tensorscope.kinds._base import Kind

KIND = Kind(
    code='graph-kept-alive',
    title="A name that outlives each step keeps that step's autograd graph alive, so memory grows every step.",
    explanation=(
        "A tensor with a grad_fn holds its whole graph: every node, and the tensors the nodes saved for backward. Storing such a tensor where the next step still reaches it (a running total, a list of losses or outputs, an attribute carried across batches) keeps each step's graph alive; `gc` does not see it, and memory grows until it runs out."
    ),
    causes=(
        'Accumulating a loss with its graph: `total += loss`.',
        'Appending outputs or losses to a list: `history.append(out)`.',
        'Carrying a tensor across batches without detaching it: `self.h = h`.',
    ),
    fixes=(
        'Store Python numbers: `total += loss.item()`.',
        'Store detached tensors: `history.append(out.detach())`.',
        'Detach carried state each step: `self.h = h.detach()`.',
    ),
    hazard=True,
)


def explain(ev, hazard: dict) -> dict:
    """The hazard from a retention finding (see NOTE [The retaining line] in kinds/_retention.py)."""
    return _retention.explain(ev, hazard, KIND)
