"""The `invalid-gradient` kind: a backward function returned a gradient of the wrong shape, dtype or device."""

from __future__ import annotations

import ast
import re

from tensorscope.kinds._base import Kind, Pattern, opening, user_files, w

KIND = Kind(
    code="invalid-gradient",
    title="A backward function returned a gradient whose shape, dtype or device does not match its input.",
    explanation=(
        "After each backward function runs, autograd checks every gradient it returned against the "
        "corresponding forward input: same shape (or one that sums to it), same dtype, same device. A custom "
        "`autograd.Function.backward` (or a gradient hook) that returns something else is refused."
    ),
    causes=(
        "A custom Function's backward returning a gradient reduced, expanded or reshaped differently from "
        "the input.",
        "A gradient moved to another device or dtype (`.to('meta')`, `.double()`) in backward or in a hook.",
        "Parameters whose shape changed (pruning, device_map='auto' on meta) between forward and backward.",
    ),
    fixes=(
        "Return from backward one gradient per forward input, each with that input's shape, dtype and device "
        "(`grad.reshape(x.shape)`, `grad.to(x.dtype)`).",
    ),
)

PATTERNS = (Pattern(r"Function\s+(?P<fn>[\w:<>]{1,300})\s+" + w("returned an invalid gradient at index")
                    + r"\s+(?P<i>\d{1,9})\s*[-\u2014]\s*(?P<detail>[^\n]{1,400})",
                    lambda m: {"node": m["fn"], "index": int(m["i"]), "detail": m["detail"].strip(),
                               "reason": ("device" if "device" in m["detail"] else
                                          "dtype" if re.search(r"type|float|int|bool", m["detail"]) else "shape")}),)


def advise(f: dict):
    if f.get("node") is None:
        return None, [], []
    return None, [f"{f['node']} returned, at index {f['index']}: {f['detail']}."], []


def _backward_return(ev, node_name: str, index=None):
    """``(file, line)`` of the last ``return`` of ``backward`` in the class named like the node.

    When the gradient returned (at ``index``) is a plain name, the last assignment to that name
    in backward is where it got its shape/dtype/device, so that line is taken instead.
    """
    from tensorscope.analysis import source

    cls = re.sub(r"Backward\d{0,3}$", "", node_name or "")
    for file in user_files(ev):
        tree = source.tree(file)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for fn in node.body:
                    if isinstance(fn, ast.FunctionDef) and fn.name == "backward":
                        returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
                        if not returns:
                            continue
                        last = max(returns, key=lambda r: r.lineno)
                        value = last.value
                        if isinstance(value, ast.Tuple) and index is not None and index < len(value.elts):
                            value = value.elts[index]
                        if isinstance(value, ast.Name):
                            sets = [n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.AugAssign))
                                    and n.lineno < last.lineno and value.id in source.target_names(
                                        n.targets[0] if isinstance(n, ast.Assign) else n.target)]
                            if sets:
                                return file, max(sets)
                        return file, last.lineno
    return None


def explain(ev):
    from tensorscope.analysis import source
    from tensorscope.analysis.common import diagnosis, where
    from tensorscope.kinds._base import fields

    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    fl = fields(ev)
    node, index, detail = fl.get("node"), fl.get("index"), fl.get("detail")
    text = (f"During backward (line {line}, `{code}`), {node or 'a backward function'} returned "
            f"an invalid gradient for its input {index if index is not None else '?'}: {detail or 'mismatch'}.")
    culprit = where(file, line)
    found = _backward_return(ev, node, index) if node else None
    if found:
        culprit = where(*found)
        text += f" Its backward returns at line {found[1]} (`{source.code(*found)}`)."
    what = {"device": "the input's device (`grad.to(x.device)`)", "dtype": "the input's dtype (`grad.to(x.dtype)`)"}.get(
        fl.get("reason"), "the input's shape (e.g. `grad.reshape(x.shape)` or `grad.sum_to_size(x.shape)`)")
    fix = (f"Make {node or 'the backward function'} return, at index {index}, a gradient with {what}, where `x` is "
           "that forward input (save its shape/dtype/device on `ctx` in forward).")
    return diagnosis(KIND.code, explanation=text, fix=fix, culprit=culprit, backward=where(file, line),
                     evidence=["autograd validated the gradients a backward function returned"])
