"""The `unused-input` kind: autograd.grad was asked for the gradient of an input the graph never used."""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds._base import Kind, Pattern, diagnosis, fields, opening, statement, w, where

KIND = Kind(
    code="unused-input",
    title="torch.autograd.grad was asked for the gradient of an input that the output does not depend on.",
    explanation=(
        "`torch.autograd.grad(outputs, inputs)` returns one gradient per input. An input that no path of "
        "the graph leads to has no gradient, and autograd refuses unless `allow_unused=True` says that "
        "None (or zeros with `materialize_grads=True`) is acceptable."
    ),
    causes=(
        "An input used only through `.detach()`, `.data`, a copy made before it required grad, or not at all "
        "(a parameter of a submodule that forward skipped).",
        "An input replaced by a new tensor (`W = W.clone()`, `x = x.to(...)`) after the list of inputs was made.",
    ),
    fixes=(
        "Pass `allow_unused=True` (and `materialize_grads=True` for zeros instead of None) when an unused input "
        "is expected.",
        "Differentiate with respect to the tensor the computation really used.",
    ),
)

PATTERNS = (
    Pattern(w("The differentiated Tensor at index") + r"\s+(?P<i>\d{1,9})\s+"
            + w("appears to not have been used in the graph.")
            + r"(?:\s+" + w("Set allow_unused=True if this is the desired behavior.") + r")?",
            lambda m: {"index": int(m["i"])}),
    Pattern(w("One of the differentiated Tensors appears to not have been used in the graph.")
            + r"(?:\s+" + w("Set allow_unused=True if this is the desired behavior.") + r")?",
            lambda m: {"index": None}),
)


def advise(f: dict):
    if f.get("index") is None:
        return None, [], []
    return None, [f"Input {f['index']} of the inputs given to autograd.grad is not used by the outputs."], []


def _grad_call(code: str):
    stmt = statement(code)
    for node in ast.walk(stmt) if stmt is not None else ():
        if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "grad" and len(node.args) >= 2:
            return node
    return None


def _used_without_graph(ev, name: str):
    """(file, line, grad-mode line, its code) of the first statement that reads ``name`` inside a block run
    with grad mode off (a recorded ``no_grad``/``inference_mode``/``set_grad_enabled(False)`` entered at a
    ``with`` statement), or None."""
    for e in (ev.doc or {}).get("events") or []:
        if e.get("kind") != "grad_mode" or e.get("enabled") is not False or not e.get("line"):
            continue
        stmt = source.statement_at(e.get("file"), e["line"])
        if not isinstance(stmt, (ast.With, ast.AsyncWith)):
            continue
        for inner in stmt.body:
            for node in ast.walk(inner):
                if isinstance(node, ast.stmt) and not isinstance(node, (ast.With, ast.For, ast.If, ast.While)) \
                        and name in source.reads(node):
                    return e.get("file"), node.lineno, e["line"], source.code(e.get("file"), e["line"])
    return None


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    index = fields(ev).get("index")
    if index is None:  # the message names none before torch 2.9: NOTE [The unused input's index before torch 2.9]
        index = (ev.failure or {}).get("unused_input")
    call = _grad_call(code)
    name = None
    if call is not None and index is not None:
        inputs = call.args[1]
        if isinstance(inputs, (ast.List, ast.Tuple)) and index < len(inputs.elts):
            name = ast.unparse(inputs.elts[index])
        elif index == 0 and not isinstance(inputs, (ast.List, ast.Tuple)):
            name = ast.unparse(inputs)
    what = f"`{name}`" if name else (f"input {index}" if index is not None else "one of the inputs")
    culprit = where(file, line, alias=name)
    rebound = None
    if name and name.isidentifier():
        stmt = source.definition(file, line, name)
        # `W = W.clone()` / `x = x.to(...)`: the name now holds a new tensor the outputs never saw
        if stmt is not None and isinstance(stmt, ast.Assign) and name in source.reads(stmt.value):
            rebound = stmt.lineno
            culprit = where(file, rebound, alias=name)
    unrecorded = None if rebound or not name or not name.isidentifier() else _used_without_graph(ev, name)
    if unrecorded is not None:
        culprit = where(unrecorded[0], unrecorded[1], alias=name)
    text = (f"Line {line} (`{code}`) asks autograd.grad for the gradient of {what}, but the outputs do not "
            "depend on it: no recorded op on the way to the outputs used that tensor.")
    if unrecorded is not None:
        ufile, uline, gline, gcode = unrecorded
        text += (f" Line {uline} (`{source.code(ufile, uline)}`) used `{name}` inside `{gcode}` (line {gline}), "
                 "where autograd records no graph, so nothing the outputs computed from there leads back to it.")
    if rebound:
        text += (f" Line {rebound} (`{source.code(file, rebound)}`) rebinds `{name}` to a new tensor; the outputs "
                 "were computed from the previous one.")
    if call is not None and not any(k.arg == "allow_unused" for k in call.keywords):
        fixed = ast.Call(func=call.func, args=call.args, keywords=call.keywords + [
            ast.keyword(arg="allow_unused", value=ast.Constant(True)),
            ast.keyword(arg="materialize_grads", value=ast.Constant(True))])
        fix = (f"If {what} may legitimately be unused, ask for zeros: `{ast.unparse(fixed)}`; otherwise "
               f"differentiate with respect to the tensor the computation actually used (a copy such as "
               f"`x.clone()`/`x.to(...)` made after the inputs were chosen is a different tensor).")
    else:
        fix = ("Differentiate with respect to the tensor the computation actually used, or pass "
               "`allow_unused=True` when an unused input is expected.")
    if rebound:
        fix = (f"Differentiate with respect to the tensor the outputs used: give the new tensor of line {rebound} "
               f"another name (`{name}_new = ...`) so that `{name}` stays the one the graph saw, or compute the "
               f"outputs after line {rebound}. " + fix)
    return diagnosis(KIND, explanation=text, fix=fix, culprit=culprit,
                     backward=where(file, line), evidence=["autograd.grad found no path to an input"])
