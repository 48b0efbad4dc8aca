"""The `silent-saved-tensor-write` kind: a tensor saved for backward changed without a version bump, so backward gives wrong gradients."""

from __future__ import annotations

from tensorscope.kinds._base import Kind

KIND = Kind(
    code='silent-saved-tensor-write',
    title=(
        'A tensor saved for backward changed without a version bump, so backward gives wrong '
        'gradients.'
    ),
    explanation=(
        'Autograd only notices in-place writes that bump the version counter. Writing through '
        "`.data`, replacing a tensor's data with `x.data = ...`, or `set_` on an alias with its own "
        'counter changes the values a node saved without any bump: backward() succeeds and silently '
        'computes gradients from the new values.'
    ),
    causes=(
        'An in-place write through `x.data` (`x.data.zero_()`, `x.data.mul_(...)`).',
        'Assigning `x.data = y` on a tensor an op has saved.',
        '`set_` on a tensor that shares storage but not the version counter.',
    ),
    fixes=(
        'Write through `x.detach()` instead of `x.data`: autograd then reports the problem.',
        'Clone before the write: `x = x.clone()` and modify the clone.',
        'Do the write after the last backward() that needs the saved value.',
    ),
    hazard=True,
)

# A hazard, not a failure: analysis/silent.py explains each one (fingerprints live there).
