"""Sizes in the report's words: one formatter for the terminal, the HTML and the kinds' texts."""

from __future__ import annotations


def human_bytes(n: int | float | None) -> str:
    """``4.0 MB``, ``256.0 KB``, ``12 B``; ``?`` when the size is not known."""
    if n is None:
        return "?"
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
