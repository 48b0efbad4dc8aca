"""Output forms: each renders the same report document (see Form)."""

from __future__ import annotations

from enum import Enum

from tensorscope.compact import expand


class Form(str, Enum):
    text = "text"
    json = "json"
    html = "html"
    sarif = "sarif"


# `-o FILE` picks the form from FILE's extension; anything else is text.
_EXTENSIONS = {".json": Form.json, ".html": Form.html, ".htm": Form.html, ".sarif": Form.sarif}


def form_for_path(path: str) -> str:
    """The output form for a report file, chosen by its extension (case-insensitive)."""
    lower = str(path).lower()
    for ext, form in _EXTENSIONS.items():
        if lower.endswith(ext):
            return form.value
    return Form.text.value


def render(doc: dict, form: str, *, width: int | None = None, color: bool | None = None, **options) -> str:
    """Render a report document in one output form (``options``: what the text form shows, see
    ``text.renderables``; the JSON always holds everything, in its compact form unless ``full``)."""
    form = Form(form)
    if form is not Form.json:  # a saved report read back may be in the compact form
        doc = expand(doc)
    if form is Form.json:
        from tensorscope.render import json as json_form

        return json_form.render(doc, full=bool(options.get("full")))
    if form is Form.text:
        from tensorscope.render import text as text_form

        return text_form.render(doc, width=width, color=color, **options)
    if form is Form.html:
        from tensorscope.render.html import render_html

        return render_html(doc)
    if form is Form.sarif:
        from tensorscope.render.sarif import render_sarif

        return render_sarif(doc)
    raise AssertionError(form)  # pragma: no cover - Form is checked exhaustive by a test
