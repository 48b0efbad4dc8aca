"""The `gradient-shape-mismatch` kind: backward(gradient) got a gradient whose shape is not the output's."""

from __future__ import annotations

import ast
import re

from tensorscope.kinds._base import Kind, Pattern, assignable, diagnosis, fields, opening, statement, w, where

KIND = Kind(
    code="gradient-shape-mismatch",
    title="backward() was given a gradient whose shape differs from the shape of the tensor it starts from.",
    explanation=(
        "`out.backward(gradient)` and `torch.autograd.backward(outputs, grad_tensors)` start backward from "
        "the given gradient of each output. That gradient must have exactly the output's shape."
    ),
    causes=(
        "A gradient made with a fixed shape (`torch.ones(1)`, `torch.FloatTensor([1])`) for an output of "
        "another shape.",
        "A per-sample output where a reduced (scalar) loss was meant.",
    ),
    fixes=(
        "Build the gradient from the output: `out.backward(torch.ones_like(out))`.",
        "Reduce the output to a scalar first: `out.sum().backward()`.",
    ),
)

_SIZE = r"torch\.Size\(\[(?P<{}>[-\d,\s]{{0,400}})\]\)"
PATTERNS = (Pattern(w("Mismatch in shape: grad_output") + r"\[(?P<i>\d{1,9})\]\s+" + w("has a shape of") + r"\s+"
                    + _SIZE.format("got") + r"\s+and\s+output\[\d{1,9}\]\s+" + w("has a shape of") + r"\s+"
                    + _SIZE.format("want") + r"\.?",
                    lambda m: {"index": int(m["i"]), "gradient_shape": [int(x) for x in re.findall(r"-?\d+", m["got"])],
                               "output_shape": [int(x) for x in re.findall(r"-?\d+", m["want"])]}),)


def advise(f: dict):
    if f.get("output_shape") is None:
        return None, [], []
    return None, [f"The gradient has shape {f['gradient_shape']}; output {f['index']} has shape "
                  f"{f['output_shape']}."], []


def _receiver(code: str):
    """The tensor ``X`` of ``X.backward(...)`` when it can be repeated in a fix."""
    stmt = statement(code)
    for node in ast.walk(stmt) if stmt is not None else ():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward" \
                and assignable(node.func.value):
            return ast.unparse(node.func.value)
    return None


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    fl = fields(ev)
    shapes = (f" (the gradient has shape {fl['gradient_shape']}, the output {fl['output_shape']})"
              if fl.get("output_shape") is not None else "")
    text = (f"Line {line} (`{code}`) starts backward with a gradient whose shape is not the output's{shapes}: "
            "the gradient passed to backward must have exactly the shape of the tensor it starts from.")
    recv = _receiver(code)
    if recv:
        fix = (f"Give a gradient of the output's shape: `{recv}.backward(torch.ones_like({recv}))`, or reduce "
               f"first: `{recv}.sum().backward()`.")
    else:
        fix = ("Give each output a gradient of its own shape (`torch.ones_like(out)`), or reduce the outputs to "
               "a scalar loss and call `loss.backward()`.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line), backward=where(file, line),
                     evidence=["backward's gradient argument was checked against the output's shape"])
