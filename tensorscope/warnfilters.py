"""Python's warning filters read as python's C code reads them (no torch import).

``warnings.filters`` holds compiled patterns for what ``filterwarnings()`` added, but plain strings for the
interpreter's default filters (``default::DeprecationWarning:__main__``) and None for "any": the C code
matches a str by equality and anything else by ``.match()``.
"""

from __future__ import annotations

import warnings


def matches(pattern, text: str) -> bool:
    """A filter's message or module test: None matches all, a str only itself, a pattern by ``match``."""
    return pattern is None or (pattern == text if isinstance(pattern, str) else bool(pattern.match(text)))


def action(text: str, category: type, module: str, lineno: int) -> str:
    """The action the filters choose for a warning of ``category`` with ``text`` located in ``module`` at
    ``lineno`` (as ``warn_explicit``)."""
    for act, msg, cat, mod, ln in warnings.filters:
        if matches(msg, text) and issubclass(category, cat) and matches(mod, module) and (ln == 0 or lineno == ln):
            return act
    return warnings.defaultaction
