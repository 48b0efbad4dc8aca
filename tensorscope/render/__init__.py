"""Output forms: each renders the same report document (see FORMS)."""

from __future__ import annotations

from enum import Enum


class Form(str, Enum):
    text = "text"
    json = "json"


def render(doc: dict, form: str, *, width: int | None = None, color: bool | None = None, **options) -> str:
    """Render a report document in one output form (``options``: what the text form shows, see
    ``text.renderables``; the JSON always holds everything)."""
    form = Form(form)
    if form is Form.json:
        from tensorscope.render import json as json_form

        return json_form.render(doc)
    if form is Form.text:
        from tensorscope.render import text as text_form

        return text_form.render(doc, width=width, color=color, **options)
    raise AssertionError(form)  # pragma: no cover - FORMS is checked exhaustive by a test
