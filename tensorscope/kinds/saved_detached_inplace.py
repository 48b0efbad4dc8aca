"""The `saved-detached-inplace` kind: a tensor saved for backward was detached in place with ``detach_()``."""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds._base import Kind, Pattern, assignable, diagnosis, last_event, opening, statement, w, where
from tensorscope.kinds.inplace_modified_saved_tensor import graph_for_report

KIND = Kind(
    code="saved-detached-inplace",
    title="A tensor saved for backward was detached in place (detach_()) before backward used it.",
    explanation=(
        "`x.detach_()` removes x's autograd history in place. When an op had saved x for backward, "
        "autograd can no longer tell which node produced it, so backward refuses to use it."
    ),
    causes=(
        "`x.detach_()` on an intermediate that a later op (`x * x`, a matmul) saved for backward.",
        "`detach_()` used to stop gradients inside a model or an update step while the graph is still needed.",
    ),
    fixes=(
        "Detach out of place and rebind: `x = x.detach()`.",
    ),
)

PATTERNS = (Pattern(w("Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().")
                    + r"\s*" + w("This is not supported, please use out-of-place `.detach()` instead")),)


def rewrite(code: str):
    """``x.detach_()`` -> ``x = x.detach()`` (only for a whole statement on an assignable target)."""
    stmt = statement(code)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and not stmt.value.args:
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr == "detach_" and assignable(func.value):
            t = ast.unparse(func.value)
            return f"{t} = {t}.detach()"
    return None


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    write = last_event(ev, "write", ("detach_",))
    culprit = where(file, line)
    text = (f"backward (line {line}, `{code}`) needed a saved tensor that had been "
            "detached in place with `detach_()`.")
    fix = "Detach out of place and rebind the name instead of `detach_()`: `x = x.detach()`."
    if write is not None and write.get("line"):
        wcode = source.code(write["file"], write["line"])
        culprit = where(write["file"], write["line"])
        text = (f"Line {write['line']} (`{wcode}`) detached in place a tensor an op had saved for backward; "
                f"backward (line {line}) could not use it.")
        new = rewrite(wcode)
        if new:
            fix = f"Detach out of place: replace the line with `{new}`."
    saved_by, evidence = None, ["a saved tensor lost its grad_fn through detach_()"]
    f = ev.failure or {}
    sf = f.get("detached")
    if sf is not None and sf.get("node"):  # the saved variable that raised, found in the graph
        saved_by = (where(sf.get("saved_file"), sf.get("saved_line"), node=sf["node"])
                    or {"node": sf["node"], "file": None, "line": None, "code": ""})
        if saved_by["line"]:
            text += f" It had been saved by {sf['node']} when line {saved_by['line']} ran (`{saved_by['code']}`)."
        evidence.append("the saved variable that raises the same error, read from the autograd graph")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=culprit, backward=where(file, line),
                     saved_by=saved_by, evidence=evidence, graph=graph_for_report(f.get("autograd_graph")))
