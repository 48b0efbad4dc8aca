"""The `inplace-modified-saved-tensor` kind: a tensor saved for backward was modified in place before backward() used it."""

from __future__ import annotations

import re

from tensorscope.kinds._base import Kind, Pattern, w
from tensorscope.kinds._message import INTS, decode_type, frame_where, ints, node_facts, snake

KIND = Kind(
    code='inplace-modified-saved-tensor',
    title='A tensor saved for backward was modified in place before backward() used it.',
    explanation=(
        'Autograd saves some inputs and outputs of an op (for example the result of sigmoid, exp or '
        'tanh, or the operands of mm) to compute gradients later. Every in-place write bumps the '
        "tensor's version counter; at backward time the saved tensor's version no longer matched the "
        'version recorded when it was saved, so its gradient would have been computed from the wrong '
        'values.'
    ),
    causes=(
        (
            'An in-place op (`x.add_()`, `x += ...`, `x[i] = ...`, `x.zero_()`) on a tensor that an '
            'earlier op saved for backward.'
        ),
        (
            'A write through an alias that shares the version counter: a view, a slice, or `.detach()` of'
            ' the saved tensor.'
        ),
        (
            'An activation module with `inplace=True` (`nn.ReLU(inplace=True)`, '
            '`nn.Dropout(inplace=True)`) overwriting a tensor the previous op saved.'
        ),
        (
            '`optimizer.step()` updating parameters in place between the forward pass and a later '
            'backward() that still needs the old parameter values.'
        ),
    ),
    fixes=(
        'Clone before the write: `y = y.clone()` and modify the clone.',
        'Use the out-of-place op: `x = x + 1` instead of `x += 1` or `x.add_(1)`.',
        'Pass `inplace=False` to activation and dropout modules.',
        'Move `optimizer.step()` after the last backward() that uses the current graph.',
    ),
)


_HINT_ENABLE = w(
    "enable anomaly detection to find the operation that failed to compute its gradient, with"
) + r"\s+torch\.autograd\.set_detect_anomaly\(True(?:,\s*check_nan=False)?\)\."
_HINT_ENABLED = w(
    "the backtrace further above shows the operation that failed to compute its gradient. "
    "The variable in question was changed in there or anywhere later. Good luck!"
)
_INPLACE = (
    w("one of the variables needed for gradient computation has been modified by an inplace operation")
    + r"(?::\s*\[(?P<type>[A-Za-z_][\w.]{0,80})\s+\[(?P<shape>" + INTS + r")\]\]"
    + r"(?:,\s+" + w("which is output") + r"\s+(?P<nr>\d{1,9})\s+of\s+(?P<op>[^\s,]{1,300}),)?"
    + r"\s+" + w("is at version") + r"\s+(?P<ver>\d{1,19});\s+"
    + w("expected version") + r"\s+(?P<exp>\d{1,19})\s+instead\."
    + r"(?:\s+Hint:\s+(?:(?P<enable>" + _HINT_ENABLE + r")|(?P<enabled>" + _HINT_ENABLED + r")))?)?"
)


def _decode(m: re.Match) -> dict:
    f = dict.fromkeys(("tensor_type", "dtype", "device", "shape", "output_nr", "output_of", "op",
                       "node", "version", "expected_version", "bumps", "is_leaf_saved"))
    f["node_guessed"] = False
    f["anomaly_enabled"] = bool(m["enabled"])
    if m["type"] is None:  # the oldest wording stops after "inplace operation"
        return f
    f["tensor_type"] = m["type"]
    f["dtype"], f["device"] = decode_type(m["type"])
    f["shape"] = ints(m["shape"])
    f["is_leaf_saved"] = m["nr"] is None
    if m["nr"] is not None:
        f["output_nr"] = int(m["nr"])
        f["output_of"] = m["op"]
        f.update(node_facts(m["op"]))
    f["version"], f["expected_version"] = int(m["ver"]), int(m["exp"])
    f["bumps"] = f["version"] - f["expected_version"]
    return f


PATTERNS = (Pattern(_INPLACE, _decode),)

# Ops whose backward saves their own output, so a write right after them breaks backward.
_SAVES_RESULT = {"Sigmoid", "Tanh", "Exp", "Exp2", "Expm1", "Relu", "LeakyRelu", "Elu", "Celu",
                 "Selu", "Softmax", "LogSoftmax", "Sqrt", "Rsqrt", "Reciprocal", "Threshold",
                 "Hardtanh", "Relu6"}
_INDEX_DTYPES = {"bool", "int64", "int32", "int16", "int8", "uint8"}
# Ops with an in-place variant: after `x.add_()` autograd shows x as an output of Add.
_HAS_INPLACE = {"Add", "Sub", "Mul", "Div", "Clamp", "Fill", "Zero", "MaskedFill", "IndexPut",
                "Copy", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Exp", "Pow", "Sqrt", "Neg",
                "Abs", "Addcmul", "Addcdiv", "Lerp", "Hardtanh", "Threshold", "Elu"}


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    evidence, fixes = [], []
    op, nr = f.get("op"), f.get("output_nr")
    if f.get("tensor_type"):
        what = f"{f.get('dtype') or f['tensor_type']}, shape {f.get('shape')}, on {f.get('device') or '?'}"
        origin = f"output {nr} of {op}" if op else "a leaf (no grad_fn): a parameter, an input or a buffer"
        evidence.append(f"The saved tensor ({what}) is {origin}.")
    if f.get("version") is not None:
        writes = "1 in-place write" if f["bumps"] == 1 else f"{f['bumps']} in-place writes"
        evidence.append(f"It is at version {f['version']} but was saved at version {f['expected_version']}: "
                        f"{writes} after it was saved.")
    if op in _HAS_INPLACE:
        evidence.append(f"Autograd names the tensor's grad_fn when backward ran: {op} created it, or was the "
                        f"last tracked in-place op on it (`{snake(op)}_()`).")
    if f.get("node_guessed"):
        evidence.append(f"Its grad_fn is probably {f['node']} (newer PyTorch prints only the op name).")
    if f.get("saved_by"):
        frames = f.get("forward_frames") or []
        at = f"; its forward call was at {frame_where(frames[-1])}, so the write happened there or later" if frames else ""
        evidence.append(f"Anomaly mode: {f['saved_by']} saved it{at}.")
    if op == "AsStrided":
        fixes.append("The saved tensor is a view that was written through another alias (autograd then shows "
                     "it as AsStrided): do not write to it, its base or any view of the same storage before "
                     "backward(); clone the view when it is made (`v = base[...].clone()`).")
    elif op == "CopySlices":
        fixes.append("The saved tensor was last changed by an indexed assignment (`x[idx] = ...`): clone it "
                     "first (`x = x.clone(); x[idx] = ...`) or build the result out of place (`torch.where`).")
    elif op:
        name = snake(op)
        fixes.append(f"The tensor is output {nr} of {op}: do not modify {name}'s output in place (e.g. "
                     f"`out.detach().zero_()` or `out += 1`), clone it first: `out = out.clone()`.")
        if op in _SAVES_RESULT:
            fixes.append(f"{op} saves its output for backward: the op right after {name} must not be in place; "
                         "pass `inplace=False` to a following `nn.ReLU`/`nn.Dropout`, or use `x = x + y`.")
    elif f.get("is_leaf_saved") and f.get("dtype") not in _INDEX_DTYPES:
        fixes.append("The saved tensor is a leaf: if `optimizer.step()` or another in-place update ran between "
                     "this forward pass and backward(), move `optimizer.step()` after the last backward(); "
                     "otherwise clone the input before writing to it.")
    if f.get("dtype") in _INDEX_DTYPES:
        fixes.append(f"It holds {f['dtype']} values, an index or mask an op saved (gather, index_select, "
                     "masked_fill, where): do not modify it in place before backward(); clone it.")
    if (f.get("bumps") or 0) > 1:
        fixes.append(f"It was written {f['bumps']} times after being saved: look for an in-place op in a loop "
                     "or repeated `+=` on it.")
    return None, evidence, fixes


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/inplace.py)."""
    from tensorscope.analysis import inplace

    return inplace.explain(ev)
