"""The `invalid-gradient` kind: a backward function returned a gradient of the wrong shape, dtype or device."""

from __future__ import annotations

import ast
import re

from tensorscope import source
from tensorscope.kinds._base import (
    diagnosis,
    fields,
    fields as _fields,
    Kind,
    opening,
    Pattern,
    statement,
    user_files,
    w,
    where,
)

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
        "A custom Function's backward returning fewer or more gradients than forward took inputs.",
        "A gradient hook (`t.register_hook(fn)`) returning a gradient of another shape or dtype, or a `.grad` "
        "assigned a tensor of another size or dtype.",
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
                                          "dtype" if re.search(r"type|float|int|bool", m["detail"]) else "shape")}),
            Pattern(r"function\s+(?P<fn>[\w:<>]{1,300})\s+" + w("returned an incorrect number of gradients")
                    + r"\s+\(expected\s+(?P<e>\d{1,9}),\s+got\s+(?P<g>\d{1,9})\)",
                    lambda m: {"node": m["fn"], "index": None, "detail": f"expected {m['e']} gradients, got {m['g']}",
                               "reason": "count", "expected": int(m["e"]), "got": int(m["g"])}),
            # a gradient hook (`t.register_hook(fn)`) returned a gradient of another size or type
            Pattern(r"hook\s+'(?P<hook>[^'\n]{1,200})'\s+has\s+changed\s+the\s+(?P<what>size|type)\s+of\s+value"
                    + r"(?:\s+\(was\s+(?P<was>[\w.]{1,100})\s+got\s+(?P<got>[\w.]{1,100})\))?",
                    lambda m: {"node": None, "hook": m["hook"], "index": None,
                               "detail": (f"the gradient was {m['was']}, the hook returned {m['got']}"
                                          if m["was"] else None),
                               "reason": "hook-shape" if m["what"] == "size" else "hook-dtype"}),
            # `x.grad = g` with g of another size or dtype than x
            Pattern(w("attempting to assign a gradient") + r"\s+(?:of\s+size\s+'(?P<gs>[^'\n]{1,400})'\s+"
                    + w("to a tensor of size") + r"\s+'(?P<ts>[^'\n]{1,400})'|with\s+dtype\s+'(?P<gd>\w{1,40})'\s+"
                    + w("to a tensor with") + r"\s+(?:grad_)?dtype\s+'(?P<td>\w{1,40})')",  # "dtype" on 2.2.2
                    lambda m: {"node": None, "index": None, "reason": "assigned-shape" if m["gs"] else "assigned-dtype",
                               "detail": (f"size {m['gs']} assigned to a tensor of size {m['ts']}" if m["gs"] else
                                          f"dtype {m['gd']} assigned to a tensor of dtype {m['td']}")}),
            Pattern(w("attempting to assign a gradient with device type") + r"\s+'(?P<gd>\w{1,40})'\s+"
                    + w("to a tensor with device type") + r"\s+'(?P<td>\w{1,40})'",
                    lambda m: {"node": None, "index": None, "reason": "assigned-device",
                               "detail": f"a gradient on {m['gd']} assigned to a tensor on {m['td']}"}))


def advise(f: dict):
    if f.get("reason") in _OTHER_SOURCES:
        title, _, fix = _OTHER_SOURCES[f["reason"]]
        return title, [f"{f['detail']}."] if f.get("detail") else [], [fix]
    if f.get("node") is None:
        return None, [], []
    if f.get("reason") == "count":
        return None, [f"{f['node']} returned {f['got']} gradients; its forward took {f['expected']} inputs."], [
            "Return one gradient per input of forward, in order, with `None` for the inputs that need none: "
            "`return grad_x, None`."]
    return None, [f"{f['node']} returned, at index {f['index']}: {f['detail']}."], []


def _backward_return(ev, node_name: str, index=None):
    """``(file, line)`` of the last ``return`` of ``backward`` in the class named like the node.

    When the gradient returned (at ``index``) is a plain name, the last assignment to that name
    in backward is where it got its shape/dtype/device, so that line is taken instead.
    """

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


# reason -> (title, what the line did, fix): the gradients that do not come from a backward function
_OTHER_SOURCES = {
    "hook-shape": ("A gradient hook returned a gradient of another shape than the tensor's.",
                   "runs backward through a tensor whose gradient hook (`register_hook`) returned a gradient of "
                   "another size",
                   "Return from the hook a gradient of the same shape as the one it receives (`return g * scale`, "
                   "not a slice or a reduction of it), or return None to keep it unchanged."),
    "hook-dtype": ("A gradient hook returned a gradient of another dtype than the tensor's.",
                   "runs backward through a tensor whose gradient hook (`register_hook`) returned a gradient of "
                   "another dtype",
                   "Return from the hook a gradient of the dtype it receives: `return (g * scale).to(g.dtype)`."),
    "assigned-shape": ("A `.grad` was assigned a tensor of another size than the tensor's.",
                       "assigns to `.grad` a tensor of another size than the tensor itself",
                       "Assign a gradient of the tensor's own shape (`x.shape`), e.g. "
                       "`x.grad = torch.zeros_like(x)`."),
    "assigned-device": ("A `.grad` was assigned a tensor on another device than the tensor's.",
                        "assigns to `.grad` a tensor on another device than the tensor itself",
                        "Assign a gradient on the tensor's own device: `x.grad = g.to(x.device)`."),
    "assigned-dtype": ("A `.grad` was assigned a tensor of another dtype than the tensor's.",
                       "assigns to `.grad` a tensor of another dtype than the tensor itself",
                       "Assign a gradient of the tensor's own dtype: `x.grad = g.to(x.dtype)`."),
}


def _other_source(ev, reason: str, fl: dict):
    at = opening(ev)
    if at is None:
        return None
    file, line, _, code = at
    title, what, fix = _OTHER_SOURCES[reason]
    stmt = statement(code)
    if reason.startswith("assigned") and isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Attribute) \
            and stmt.targets[0].attr == "grad":  # name the tensor of this line in the fix
        x, g = ast.unparse(stmt.targets[0].value), ast.unparse(stmt.value)
        fix = ((f"`{g}` does not have `{x}`'s shape: assign a gradient of shape `{x}.shape` (e.g. "
                f"`{x}.grad = torch.zeros_like({x})`), or fix how `{g}` is computed.") if reason == "assigned-shape"
               else f"Assign a gradient on `{x}`'s own device: `{x}.grad = ({g}).to({x}.device)`."
               if reason == "assigned-device"
               else f"Assign a gradient of `{x}`'s own dtype: `{x}.grad = ({g}).to({x}.dtype)`.")
    detail = f" ({fl['detail']})" if fl.get("detail") else ""
    hook = fl.get("hook")
    culprit = where(file, line)
    if hook and hook != "<lambda>":
        found = _definition(ev, hook)
        if found:
            culprit = where(*found)
            what += f"; the hook `{hook}` returns it at line {found[1]}"
    return diagnosis(KIND, title=title, explanation=f"Line {line} (`{code}`) {what}{detail}.", fix=fix,
                     culprit=culprit, backward=where(file, line) if reason.startswith("hook") else None,
                     evidence=[f"autograd checked the gradient against its tensor ({reason})"])


def _definition(ev, name: str):
    """``(file, line)`` of ``def name`` in the program's files."""

    for file in user_files(ev):
        tree = source.tree(file)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.FunctionDef) and node.name == name:
                returns = [n.lineno for n in ast.walk(node) if isinstance(n, ast.Return)]
                return file, max(returns) if returns else node.lineno
    return None


def explain(ev):
    if _fields(ev).get("reason") in _OTHER_SOURCES:
        return _other_source(ev, _fields(ev)["reason"], _fields(ev))
    return _from_backward_function(ev)


def _from_backward_function(ev):
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
    if fl.get("reason") == "count":
        text = (f"During backward (line {line}, `{code}`), {node or 'a backward function'} returned {fl.get('got')} "
                f"gradients, but its forward took {fl.get('expected')} inputs: backward must return one per input."
                + (f" Its backward returns at line {found[1]} (`{source.code(*found)}`)." if found else ""))
        fix = (f"Return {fl.get('expected')} values from {node or 'backward'}, one per forward input in order, with "
               "`None` for an input that needs no gradient (e.g. `return grad_x, None`).")
        return diagnosis(KIND, explanation=text, fix=fix, culprit=culprit, backward=where(file, line),
                         evidence=["autograd counted the gradients a backward function returned"])
    what = {"device": "the input's device (`grad.to(x.device)`)", "dtype": "the input's dtype (`grad.to(x.dtype)`)"}.get(
        fl.get("reason"), "the input's shape (e.g. `grad.reshape(x.shape)` or `grad.sum_to_size(x.shape)`)")
    fix = (f"Make {node or 'the backward function'} return, at index {index}, a gradient with {what}, where `x` is "
           "that forward input (save its shape/dtype/device on `ctx` in forward).")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=culprit, backward=where(file, line),
                     evidence=["autograd validated the gradients a backward function returned"])
