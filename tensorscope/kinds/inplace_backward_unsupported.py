"""The `inplace-backward-unsupported` kind: an in-place op whose backward PyTorch cannot compute."""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds._base import (
    assignable,
    diagnosis,
    fields,
    Kind,
    last_event,
    opening,
    Pattern,
    statement,
    w,
    where,
)

KIND = Kind(
    code="inplace-backward-unsupported",
    title="An in-place op was recorded whose backward PyTorch cannot compute from the overwritten values.",
    explanation=(
        "Some in-place ops lose the information their backward needs: `leaky_relu_` with a negative slope "
        "overwrites its input, and the sign of the result no longer tells which slope was applied. PyTorch "
        "records them but refuses to run their backward."
    ),
    causes=(
        "`F.leaky_relu_(x, negative_slope)` or `nn.LeakyReLU(negative_slope, inplace=True)` with a negative "
        "slope.",
    ),
    fixes=(
        "Call the out-of-place op: `x = F.leaky_relu(x, negative_slope)`, or `nn.LeakyReLU(slope)` without "
        "`inplace=True`.",
    ),
)

# PyTorch's kernels name the op their own way: leakyReLu (leaky_relu_), elu (elu_, celu_, selu_), rrelu_.
_OPS = {"leakyrelu": "leaky_relu_", "elu": "elu_", "rrelu_": "rrelu_", "rrelu": "rrelu_"}
PATTERNS = (
    Pattern(r"In-place\s+(?P<op>\w{1,40})\s+" + w("backward calculation is triggered with a negative slope which "
                                                 "is not supported.") + r"(?:[^\n]{0,600})",
            lambda m: {"op": _OPS.get(m["op"].lower(), m["op"])}),
)

_OUT_OF_PLACE = {"leaky_relu_": "leaky_relu", "elu_": "elu", "rrelu_": "rrelu", "celu_": "celu", "selu_": "selu"}


def rewrite(code: str):
    """The out-of-place form of a ``leaky_relu_`` call line, or None (built from the line's AST)."""
    stmt = statement(code)
    if not isinstance(stmt, (ast.Expr, ast.Assign)) or not isinstance(stmt.value, ast.Call):
        return None
    call = stmt.value
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _OUT_OF_PLACE and call.args:
        if ast.unparse(func.value) in ("F", "torch.nn.functional", "nn.functional", "torch"):
            # F.leaky_relu_(x, s) -> x = F.leaky_relu(x, s)
            new = ast.Call(func=ast.Attribute(value=func.value, attr=_OUT_OF_PLACE[func.attr], ctx=ast.Load()),
                           args=call.args, keywords=call.keywords)
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else call.args[0]
            if not assignable(target):
                return None
            return f"{ast.unparse(target)} = {ast.unparse(new)}"
    return None


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at

    op = fields(ev).get("op") or "leaky_relu_"
    write = last_event(ev, "write", (op,) if op != "elu_" else ("elu_", "celu_", "selu_"))
    culprit, fix = where(file, line), None
    text = (f"Line {line} (`{code}`) ran backward through an in-place `{op}` with a "
            "negative slope, whose backward PyTorch does not support.")
    if write is not None and write.get("line"):
        wcode = source.code(write["file"], write["line"])
        culprit = where(write["file"], write["line"], alias=None)
        text = (f"Line {write['line']} (`{wcode}`) applied `{write.get('op')}` in place with a negative slope; "
                f"backward (line {line}) cannot compute its gradient from the overwritten values.")
        new = rewrite(wcode)
        if new:
            fix = f"Use the out-of-place op: replace the line with `{new}`."
        elif "inplace" in wcode or "ReLU" in wcode or "ELU" in wcode:
            fix = "Build the activation module without `inplace=True` (e.g. `nn.LeakyReLU(negative_slope)`)."
    if fix is None:
        fix = (f"Use the out-of-place op (`F.{_OUT_OF_PLACE.get(op, 'leaky_relu')}(x, slope)` instead of `F.{op}`), "
               "or drop `inplace=True` from the activation module.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=culprit, backward=where(file, line),
                     evidence=["the in-place op's backward refused a negative slope"])
