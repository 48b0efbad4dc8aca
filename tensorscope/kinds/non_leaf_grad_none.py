"""The `non-leaf-grad-none` kind: the ``.grad`` of a non-leaf tensor (always None) was used."""

from __future__ import annotations

import ast
import re

from tensorscope import source
from tensorscope.kinds._base import Kind, Pattern, diagnosis, message, opening, site, statement, w, where

KIND = Kind(
    code="non-leaf-grad-none",
    title="The .grad of a non-leaf tensor was used, but autograd only fills .grad of leaf tensors, so it is None.",
    explanation=(
        "backward() accumulates gradients into `.grad` of leaf tensors only (tensors created by the user "
        "with requires_grad=True, such as parameters). A tensor computed from them, even by `.to()`, "
        "`.float()`, `* 0.1` or `.cuda()`, is a non-leaf: its `.grad` stays None unless `retain_grad()` was "
        "called, and using it raises a TypeError or AttributeError on None."
    ),
    causes=(
        "A parameter rebuilt by an op after `requires_grad=True` was set: `w = torch.randn(3, "
        "requires_grad=True).to(device)` or `w = w * 0.1`.",
        "Reading `.grad` of an activation or a model output instead of a parameter.",
    ),
    fixes=(
        "Make the tensor a leaf: create it with its final dtype/device and scale, then ask for grad: "
        "`w = (torch.randn(3) * 0.1).requires_grad_()`.",
        "Call `h.retain_grad()` before backward() when the gradient of an intermediate is wanted.",
    ),
)

_NONE_USE = (r"(?:TypeError:\s+" + w("unsupported operand type(s) for") + r"\s+[^:\n]{1,12}:\s+[^\n]{0,80}'NoneType'"
             + r"|TypeError:\s+'NoneType'\s+object\s+is\s+not\s+subscriptable"
             + r"|AttributeError:\s+'NoneType'\s+object\s+has\s+no\s+attribute\s+'\w{1,100}')")
# A pasted traceback shows the code line above the message: only a `.grad` read there claims the error;
# PyTorch's own warning about non-leaf .grad access claims it too.
PATTERNS = (
    Pattern(r"\.grad\b[^\n]{0,300}\n(?:[ \t]{0,200}[~^][~^ \t]{0,400}\n)?\s{0,200}" + _NONE_USE),
    Pattern(w("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed.")
            + r"[\s\S]{0,6000}?" + _NONE_USE),
)

_NONE_MESSAGE = re.compile(r"unsupported operand type\(s\) for .{1,12}: .{0,80}'NoneType'"
                           r"|'NoneType' object (?:is not subscriptable|has no attribute)")


def _grad_reads(code: str) -> list:
    """``X`` of every ``X.grad`` read in the line (not the targets of an assignment)."""
    stmt = statement(code)
    out = []
    for node in ast.walk(stmt) if stmt is not None else ():
        if isinstance(node, ast.Attribute) and node.attr == "grad" and isinstance(node.ctx, ast.Load):
            out.append(ast.unparse(node.value))
    return out


def recognise(ev) -> bool:
    """A None error raised on a line that reads ``X.grad`` where X is a non-leaf the report knows."""

    if not _NONE_MESSAGE.search(message(ev)):
        return False
    file, line, _ = site(ev)
    return bool(_grad_reads(source.code(file, line)))


def _non_leaf(ev, name: str):
    """The report's record of the non-leaf tensor called ``name`` (the last one), or None."""
    found = None
    for t in (ev.doc or {}).get("tensors") or []:
        if name in (t.get("names") or []) and t.get("is_leaf") is False:
            found = t
    return found


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    names = _grad_reads(code)
    if not names:
        return None
    name = names[0]
    rec = next((r for r in (_non_leaf(ev, n) for n in names) if r is not None), None)
    if rec is not None:
        name = next(n for n in names if n in rec["names"])
    made = (rec or {}).get("created") or {}
    if not made.get("line"):  # not recorded: the statement that last bound the name
        stmt = source.definition(file, line, name.split(".")[0]) if "." not in name else None
        if stmt is not None:
            made = {"file": file, "line": stmt.lineno}
    text = (f"Line {line} (`{code}`) uses `{name}.grad`, which is None: `{name}` is not a leaf tensor (it was "
            "computed from a tensor that requires grad), and backward() fills `.grad` of leaves only.")
    culprit = where(file, line, alias=name)
    if made.get("line"):
        mcode = source.code(made["file"], made["line"])
        text += f" It was made at line {made['line']} (`{mcode}`)."
        culprit = where(made["file"], made["line"], alias=name)
        fix = (f"Make `{name}` a leaf where it is made: build the value first, then ask for grad, e.g. "
               f"`{name} = ({_value(mcode) or '...'}).detach().requires_grad_()`; or call "
               f"`{name}.retain_grad()` before backward() if the gradient of this intermediate is wanted.")
        if _value(mcode) is None:
            fix = (f"Make `{name}` a leaf where it is made (line {made['line']}): compute its value first and call "
                   f"`.requires_grad_()` last (or `.detach().requires_grad_()`); or call `{name}.retain_grad()` "
                   "before backward().")
    else:
        fix = (f"Read `.grad` of the leaf tensors (the parameters), or call `{name}.retain_grad()` before "
               "backward() to keep this intermediate's gradient.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=culprit, evidence=[
        f"`{name}` is a non-leaf tensor" if rec is not None else f"line {line} reads `{name}.grad`",
        f"exception: {message(ev)[:300]}"])


def _value(code: str):
    """The right-hand side of ``name = value`` when the line is a simple assignment."""
    stmt = statement(code)
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return ast.unparse(stmt.value)
    return None
