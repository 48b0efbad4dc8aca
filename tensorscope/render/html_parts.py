"""What the HTML form and its graph section share: escaping, clipping and links to timeline rows.

Kept apart from render/html.py so that html_graph.py can use them without importing the page
that includes it (no import cycle).
"""

from __future__ import annotations

import html


def esc(value) -> str:
    """HTML-escape anything (quotes included, so it is safe in attributes too)."""
    return html.escape("" if value is None else str(value), quote=True)


def clip(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters, an ellipsis marking the cut."""
    return text if len(text) <= n else text[: n - 1] + "…"


def place_link(file, line, anchors: dict) -> str:
    """``file:line`` as text, linked to its timeline row when there is one."""
    if not line:
        return ""
    label = f"{esc(file or '')}:{esc(line)}"
    target = anchors.get((file, line))
    return f'<a href="#{target}">{label}</a>' if target else label
