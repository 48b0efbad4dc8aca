"""Recognise a pasted PyTorch error text or traceback and decode its facts.

The text is only matched against regular expressions, never executed or
evaluated, and this module imports nothing from torch. Every pattern is
anchored on a literal phrase and uses bounded repetition, so matching stays
linear in the size of the text; only the last :data:`MAX_SCAN` characters
are looked at.

Example::

    >>> p = parse("RuntimeError: element 0 of tensors does not require grad "
    ...           "and does not have a grad_fn")
    >>> p.kind, p.exception_type, p.fields["index"]
    ('no-grad-fn', 'RuntimeError', 0)
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Optional

from tensorscope.kinds import ADVICE as _KIND_ADVICE
from tensorscope.kinds import KINDS
from tensorscope.kinds import PATTERNS as _KIND_PATTERNS

#: Only the last this-many characters of a text are scanned.
MAX_SCAN = 2_000_000
_LINE_CAP = 8192  # longer lines are never traceback frames
_TRIES = 16  # matches per pattern decoded, from the last one back


@dataclass
class ParsedMessage:
    """A recognised failure: its kind, the message itself and the decoded facts."""

    kind: str
    exception_type: Optional[str]
    message: str
    fields: dict = field(default_factory=dict)
    frames: list = field(default_factory=list)


# --------------------------------------------------------------------------
# Building patterns. NOTE [Wrapped messages]: terminals, log files and issue
# comments break long messages over lines, so a space in a phrase matches
# any run of whitespace, newlines included.


def _w(phrase: str) -> str:
    """Return a regex for ``phrase`` where each space matches any whitespace run."""
    return r"\s+".join(re.escape(word) for word in phrase.split(" "))


_DEV = r"[A-Za-z_]\w{0,30}(?::\d{1,6})?"
_INTS = r"[-\d,\s]{0,400}"
_NAME = r"[\w:<>]{1,300}"  # a node or op name as autograd prints it

_HINT_ENABLE = _w(
    "enable anomaly detection to find the operation that failed to compute its gradient, with"
) + r"\s+torch\.autograd\.set_detect_anomaly\(True(?:,\s*check_nan=False)?\)\."
_HINT_ENABLED = _w(
    "the backtrace further above shows the operation that failed to compute its gradient. "
    "The variable in question was changed in there or anywhere later. Good luck!"
)
_INPLACE = (
    _w("one of the variables needed for gradient computation has been modified by an inplace operation")
    + r"(?::\s*\[(?P<type>[A-Za-z_][\w.]{0,80})\s+\[(?P<shape>" + _INTS + r")\]\]"
    + r"(?:,\s+" + _w("which is output") + r"\s+(?P<nr>\d{1,9})\s+of\s+(?P<op>[^\s,]{1,300}),)?"
    + r"\s+" + _w("is at version") + r"\s+(?P<ver>\d{1,19});\s+"
    + _w("expected version") + r"\s+(?P<exp>\d{1,19})\s+instead\."
    + r"(?:\s+Hint:\s+(?:(?P<enable>" + _HINT_ENABLE + r")|(?P<enabled>" + _HINT_ENABLED + r")))?)?"
)
_SAVED = r"\s+(?:tensors|variables)\s+"  # "variables" before 1.10
_BACKWARD_TWICE = (
    _w("Trying to backward through the graph a second time")
    + r"(?:\s+\(" + _w("or directly access saved") + _SAVED + _w("after they have already been freed).")
    + r"|,\s+" + _w("but the saved intermediate results have already been freed.") + r")?"
    + r"(?:\s+" + _w("Saved intermediate values of the graph are freed when you call .backward() or "
                     "autograd.grad().") + r")?"
    + r"(?:\s+" + _w("Specify retain_graph=True") + r"\s+(?:"
    + _w("if you need to backward through the graph a second time or if you need to access saved")
    + _SAVED + _w("after calling backward.")
    + r"|" + _w("when calling backward the first time.")
    + r"|" + _w("when calling .backward() or autograd.grad() the first time.") + r"))?"
)
_VIEW_MULTI = (
    _w("This view is") + r"\s+(?:the|an)\s+" + _w("output of a function that returns multiple views.")
    + r"(?:\s+" + _w("Such functions do not allow the output views to be modified inplace. "
                     "You should replace the inplace operation by an out-of-place one.")
    + r"|\s+" + _w("Inplace operators on such views are being deprecated") + r"[^\n]{0,400})?"
)
_VIEW_AMBIGUOUS = (
    _w("Given that this use case is ambiguous and error-prone, it is forbidden.")
    + r"(?:\s+" + _w("You can clarify your code by moving both the view and the inplace either both inside the")
    + r"\s+(?:no_grad|inference_mode)\s+"
    + _w("block (if you don't want the inplace to be tracked) or both outside (if you want the inplace "
         "to be tracked).") + r")?"
)
_VIEW_CUSTOM = (
    _w("This view was created inside a custom Function (or because an input was returned as-is)")
    + r"(?:\s+" + _w("and the autograd logic to handle view+inplace would override the custom backward "
                     "associated with the custom Function, leading to incorrect gradients. This behavior is "
                     "forbidden. You can fix this by cloning the output of the custom Function.") + r")?"
)
_VIEW_TAILS = (r"(?:\s+(?P<multi>" + _VIEW_MULTI + r")|\s+(?P<ambiguous>" + _VIEW_AMBIGUOUS
               + r")|\s+(?P<custom>" + _VIEW_CUSTOM + r"))?")
_MODIFIED = (r"(?P<how>is\s+being|" + _w("its base or another view of its base has been")
             + r")\s+modified\s+inplace")
_VIEW_OUTPUT = (r"Output\s+(?P<nr>\d{1,9})\s+of\s+(?P<op>" + _NAME + r")\s+" + _w("is a view and") + r"\s+"
                + _MODIFIED + r"\." + _VIEW_TAILS)
_VIEW_MODE = (_w("A view was created in") + r"\s+(?P<mode>no_grad|inference)\s+mode\s+and\s+" + _MODIFIED
              + r"\s+(?:" + _w("with grad mode enabled") + r"|" + _w("in normal mode") + r")\." + _VIEW_TAILS)
_NO_GRAD_FN = (r"element\s+(?P<i>\d{1,9})\s+of\s+"
               + _w("tensors does not require grad and does not have a grad_fn"))
_LEAF = (r"[Aa]\s+(?P<view>" + _w("view of a") + r"\s+)?" + _w("leaf Variable that requires grad")
         + r"\s+(?:is\s+being|has\s+been)\s+" + _w("used in an in-place operation") + r"\.?")
_OVERLAP = (_w("unsupported operation:") + r"\s+(?:(?P<one>"
            + _w("more than one element of the written-to tensor refers") + r")|"
            + _w("some elements of the input tensor and the written-to tensor refer") + r")\s+"
            + _w("to a single memory location.")
            + r"(?:\s+" + _w("Please clone() the tensor before performing the operation.") + r")?")
_NON_SCALAR = (_w("grad can be implicitly created only for") + r"\s+(?:real\s+)?" + _w("scalar outputs")
               + r"(?:\s+but\s+got\s+torch\.(?P<dtype>\w{1,40}))?")
_NON_FLOAT = (r"(?P<o>[Oo])nly\s+" + _w("Tensors of floating point") + r"\s+(?P<complex>and\s+complex\s+)?"
              + _w("dtype can require gradients"))
_DATA_NON_FLOAT = _w("data set to a tensor that requires gradients must be floating point or complex dtype")
_NUMPY = (_w("Can't call numpy() on") + r"\s+(?:Tensor|Variable)\s+" + _w("that requires grad.")
          + r"(?:\s+Use\s+(?:tensor|var)\.detach\(\)\.numpy\(\)\s+instead\.)?")
_SAME_DEVICE = _w("Expected all tensors to be on the same device")
_METHOD = r"\s+(?P<method>[\w.:]{1,200})\)"
_TWO_DEVICES = (_SAME_DEVICE + r",\s+" + _w("but found at least two devices,")
                + r"\s+(?P<d1>" + _DEV + r")\s+and\s+(?P<d2>" + _DEV + r")!"
                + r"(?:\s+\(" + _w("when checking") + r"\s+arg(?:ument)?\s+" + _w("for argument")
                + r"\s+(?P<arg>\w{1,100})\s+in\s+method" + _METHOD + r")?")
_BUT_GOT = (_SAME_DEVICE + r",\s+but\s+got\s+(?P<arg>\w{1,100})\s+is\s+on\s+(?P<d2>" + _DEV + r"),\s+"
            + _w("different from other tensors on") + r"\s+(?P<d1>" + _DEV + r")"
            + r"(?:\s+\(" + _w("when checking argument in method") + _METHOD + r")?")
_CPU_EXPECTED = (_SAME_DEVICE + r"\.\s+(?P<op>\w{1,100}):?\s+expected\s+'(?P<arg>\w{1,100})'\s+to\s+be\s+"
                 + r"(?:a\s+)?" + _w("CPU tensor, but got tensor on") + r"\s+(?P<d2>" + _DEV + r")")
_INPUT_WEIGHT = (r"Input\s+type\s+\((?P<t1>[\w.]{1,80})\)\s+and\s+weight\s+type\s+\((?P<t2>[\w.]{1,80})\)\s+"
                 + _w("should be the same")
                 + r"(?:\s+" + _w("or input should be a MKLDNN tensor and weight is a dense tensor") + r")?")
_NO_BACKEND = _w("Torch not compiled with") + r"\s+(?P<backend>CUDA|XPU|MTIA|MPS|HIP)\s+enabled"
_SET_STORAGE = (r"setStorage:\s+sizes\s+\[(?P<sizes>" + _INTS + r")\],\s+strides\s+\[(?P<strides>" + _INTS
                + r")\],\s+" + _w("storage offset") + r"\s+(?P<offset>\d{1,19}),\s+and\s+itemsize\s+"
                + r"(?P<itemsize>\d{1,6})\s+" + _w("requiring a storage size of") + r"\s+(?P<required>\d{1,19})\s+"
                + _w("are out of bounds for storage of size") + r"\s+(?P<available>\d{1,19})")
_EXPAND = (_w("The expanded size of the tensor") + r"\s+\((?P<target>-?\d{1,19})\)\s+"
           + _w("must match the existing size") + r"\s+\((?P<existing>\d{1,19})\)\s+"
           + _w("at non-singleton dimension") + r"\s+(?P<dim>\d{1,9})\."
           + r"(?:\s+Target\s+sizes:\s+\[(?P<tsizes>" + _INTS + r")\]\.\s+"
           + r"Tensor\s+sizes:\s+\[(?P<sizes>" + _INTS + r")\])?")
_INFERENCE_INPLACE = (_w("Inplace update to inference tensor outside InferenceMode is not allowed.")
                      + r"(?:\s*" + _w("You can make a clone to get a normal tensor before doing inplace update.")
                      + r")?(?:\s*See\s+https://github\.com/pytorch/rfcs/pull/17\s+for\s+more\s+details\.)?")


# --------------------------------------------------------------------------
# Decoding the legacy tensor type names that autograd messages print.

_DDP_UNUSED = (
    _w("Expected to have finished reduction in the prior iteration before starting a new one.")
    + r"(?:\s+" + _w("This error indicates that your") + r"\s+(?P<why>module\s+has\s+parameters|training\s+graph\s+has\s+changed))?"
    + r"(?:[\s\S]{0,4000}?" + _w("Parameter indices which did not receive grad for rank")
    + r"\s+(?P<rank>\d{1,6}):(?P<indices>[ \d]{1,20000}))?"
    + r"(?:[\s\S]{0,4000}?" + _w("Parameters which did not receive grad for rank")
    + r"\s+(?P<nrank>\d{1,6}):\s*(?P<names>[^\n]{1,20000}))?"
)
_DDP_READY_TWICE = (
    _w("Expected to mark a variable ready only once.")
    + r"(?:[\s\S]{0,4000}?" + _w("Parameter at index") + r"\s+(?P<index>\d{1,9})"
    + r"(?:\s+with\s+name\s+(?P<name>[\w.]{1,500}))?\s+" + _w("has been marked as ready twice.") + r")?"
)
_SCALAR = {
    "Byte": "uint8", "Char": "int8", "Short": "int16", "Int": "int32", "Long": "int64",
    "Half": "float16", "Float": "float32", "Double": "float64", "Bool": "bool",
    "BFloat16": "bfloat16", "ComplexHalf": "complex32", "ComplexFloat": "complex64",
    "ComplexDouble": "complex128", "QInt8": "qint8", "QUInt8": "quint8", "QInt32": "qint32",
    "QUInt4x2": "quint4x2", "QUInt2x4": "quint2x4", "UInt16": "uint16", "UInt32": "uint32",
    "UInt64": "uint64", "Float8_e5m2": "float8_e5m2", "Float8_e4m3fn": "float8_e4m3fn",
    "Float8_e5m2fnuz": "float8_e5m2fnuz", "Float8_e4m3fnuz": "float8_e4m3fnuz",
}
# `torch.FloatTensor`, `torch.cuda.HalfTensor` (the python layer's names) ...
_LEGACY = re.compile(
    r"torch\.(?:(?P<dev>cuda|xpu|mps|hpu|mtia|meta|xla|ipu)\.)?(?:sparse\.)?(?P<scalar>\w{1,40}?)Tensor"
)
# ... and `CPUBFloat16Type`, `CUDAComplexFloatType`, `CPUBoolType` (C++ names, which
# the python layer leaves as they are for dtypes without a legacy name).
_DISPATCH = re.compile(
    r"(?:Sparse|SparseCsr|Quantized|Mkldnn|Nested)?(?P<dev>CPU|CUDA|HIP|XPU|MPS|HPU|MTIA|Meta|XLA|Lazy|IPU)"
    r"(?P<scalar>\w{1,40}?)Type"
)
_DEVICE_OF = {"hip": "cuda"}


def _decode_type(name: str) -> tuple[Optional[str], Optional[str]]:
    """Return ``(dtype, device)`` for a tensor type name such as ``torch.cuda.FloatTensor``."""
    m = _LEGACY.fullmatch(name) or _DISPATCH.fullmatch(name)
    if not m:
        return None, None
    dev = (m["dev"] or "cpu").lower()
    return _SCALAR.get(m["scalar"]), _DEVICE_OF.get(dev, dev)


def _ints(text: Optional[str]) -> list:
    """Return the integers in a printed list such as ``[4, 512, 16, 16]``."""
    return [int(x) for x in re.findall(r"-?\d{1,19}", text or "")]


def _node_facts(name: str) -> dict:
    """Split a printed node name into the forward ``op`` and the backward ``node``.

    Older releases print the node (``SigmoidBackward0``, ``ViewBackward``); 2.13
    prints the op (``Sigmoid``), so the node is reconstructed and marked guessed:
    it may really be ``...Backward1`` or, for a custom Function, ``...Backward``.
    """
    short = name[len("torch::autograd::"):] if name.startswith("torch::autograd::") else name
    m = re.fullmatch(r"(?P<op>.{1,300}?)Backward\d{0,3}", short)
    if m:
        return {"op": m["op"], "node": short, "node_guessed": False}
    if short != name or "<" in short:  # C++ nodes (CopySlices, CppNode<F>) print their own name
        return {"op": short, "node": short, "node_guessed": False}
    return {"op": short, "node": short + "Backward0", "node_guessed": True}


# --------------------------------------------------------------------------
# Decoders: a match -> fields, or None when the match is not really this failure.


def _inplace(m: re.Match) -> dict:
    f = dict.fromkeys(("tensor_type", "dtype", "device", "shape", "output_nr", "output_of", "op",
                       "node", "version", "expected_version", "bumps", "is_leaf_saved"))
    f["node_guessed"] = False
    f["anomaly_enabled"] = bool(m["enabled"])
    if m["type"] is None:  # the oldest wording stops after "inplace operation"
        return f
    f["tensor_type"] = m["type"]
    f["dtype"], f["device"] = _decode_type(m["type"])
    f["shape"] = _ints(m["shape"])
    f["is_leaf_saved"] = m["nr"] is None
    if m["nr"] is not None:
        f["output_nr"] = int(m["nr"])
        f["output_of"] = m["op"]
        f.update(_node_facts(m["op"]))
    f["version"], f["expected_version"] = int(m["ver"]), int(m["exp"])
    f["bumps"] = f["version"] - f["expected_version"]
    return f


def _view(m: re.Match) -> dict:
    f = {"reason": None, "op": None, "node": None, "node_guessed": False, "output_nr": None,
         "base_modified": not m["how"].startswith("is")}
    gd = m.groupdict()
    if gd.get("nr") is not None:
        f["output_nr"] = int(m["nr"])
        f.update(_node_facts(m["op"]))
    if m["multi"]:
        f["reason"] = "multiple-views"
    elif m["custom"]:
        f["reason"] = "custom-function"
    elif gd.get("mode") == "inference":
        f["reason"] = "inference-mode-view"
    elif gd.get("mode") == "no_grad" or m["ambiguous"]:
        f["reason"] = "no-grad-view"
    return f


def _non_float(m: re.Match) -> dict:
    # Which entry point printed which wording was measured on 2.13; older releases differ.
    if m["o"] == "O":
        via = "factory"
    else:
        via = "requires_grad-setter" if m["complex"] else "requires_grad_"
    return {"via": via, "complex_allowed": bool(m["complex"])}


def _method_op(method: Optional[str]) -> Optional[str]:
    """Return the op of a dispatcher wrapper name: ``wrapper_CUDA__index_select`` -> ``index_select``."""
    if not method:
        return None
    return re.sub(r"^wrapper_(?:[A-Za-z]+_)?_?", "", method) or None


def _two_devices(m: re.Match) -> dict:
    gd = m.groupdict()
    method = gd.get("method")
    first = gd.get("d1") or "cpu"  # "addmm: expected 'mat2' to be a CPU tensor" names one device
    return {"reason": "two-devices", "devices": [first.lower(), m["d2"].lower()],
            "argument": gd.get("arg"), "method": method, "op": gd.get("op") or _method_op(method)}


def _input_weight(m: re.Match) -> Optional[dict]:
    (dt1, d1), (dt2, d2) = _decode_type(m["t1"]), _decode_type(m["t2"])
    if d1 is None or d2 is None or d1 == d2:
        return None  # same device: a dtype mismatch, which is not a kind tensorscope knows
    return {"reason": "input-weight", "devices": [d1, d2], "argument": "input", "method": None,
            "op": None, "dtypes": [dt1, dt2]}


def _as_strided(m: re.Match) -> dict:
    return {"reason": "as-strided-out-of-bounds", "sizes": _ints(m["sizes"]),
            "strides": _ints(m["strides"]), "storage_offset": int(m["offset"]),
            "itemsize": int(m["itemsize"]), "required_nbytes": int(m["required"]),
            "storage_nbytes": int(m["available"])}


def _expand(m: re.Match) -> dict:
    return {"reason": "expand-size-mismatch", "target_size": int(m["target"]),
            "existing_size": int(m["existing"]), "dim": int(m["dim"]),
            "target_sizes": _ints(m["tsizes"]) if m["tsizes"] is not None else None,
            "sizes": _ints(m["sizes"]) if m["sizes"] is not None else None}


@dataclass(frozen=True)
class _Pattern:
    kind: str
    regex: re.Pattern
    decode: Callable[[re.Match], Optional[dict]]


def _ddp_unused(m: re.Match) -> dict:
    names = [n.strip() for n in (m["names"] or "").split(",") if n.strip()]
    rank = m["rank"] or m["nrank"]
    return {"indices": [int(i) for i in (m["indices"] or "").split()], "names": names,
            "rank": int(rank) if rank is not None else None,
            "reason": "static-graph" if m["why"] and "graph" in m["why"] else "unused-parameters"}


def _p(kind: str, regex: str, decode: Callable[[re.Match], Optional[dict]] = lambda m: {}) -> _Pattern:
    return _Pattern(kind, re.compile(regex), decode)


_PATTERNS = (
    _p("inplace-modified-saved-tensor", _INPLACE, _inplace),
    _p("backward-twice", _BACKWARD_TWICE),
    _p("no-grad-fn", _NO_GRAD_FN, lambda m: {"index": int(m["i"])}),
    _p("leaf-inplace", _LEAF, lambda m: {"view_of_leaf": bool(m["view"])}),
    _p("view-inplace", _VIEW_OUTPUT, _view),
    _p("view-inplace", _VIEW_MODE, _view),
    _p("overlapping-write", _OVERLAP, lambda m: {"reason": "internal-overlap" if m["one"] else "input-overlap"}),
    _p("non-scalar-backward", _NON_SCALAR, lambda m: {"dtype": m["dtype"]}),
    _p("non-float-requires-grad", _NON_FLOAT, _non_float),
    _p("non-float-requires-grad", _DATA_NON_FLOAT, lambda m: {"via": "data-setter", "complex_allowed": True}),
    _p("numpy-requires-grad", _NUMPY),
    _p("resize-requires-grad", _w("cannot resize variables that require grad")),
    _p("device-mismatch", _TWO_DEVICES, _two_devices),
    _p("device-mismatch", _BUT_GOT, _two_devices),
    _p("device-mismatch", _CPU_EXPECTED, _two_devices),
    _p("device-mismatch", _INPUT_WEIGHT, _input_weight),
    _p("device-mismatch", _NO_BACKEND, lambda m: {"reason": "no-" + m["backend"].lower(), "backend": m["backend"]}),
    _p("ddp-unused-parameters", _DDP_UNUSED, _ddp_unused),
    _p("ddp-mark-ready-twice", _DDP_READY_TWICE,
       lambda m: {"index": int(m["index"]) if m["index"] else None, "name": m["name"]}),
    _p("other", _SET_STORAGE, _as_strided),
    _p("other", _EXPAND, _expand),
    _p("other", _INFERENCE_INPLACE, lambda m: {"reason": "inference-tensor-inplace"}),
    # the kinds that declare their own patterns (tensorscope/kinds/*.py)
    *(_Pattern(code, re.compile(p.regex), p.decode) for code, p in _KIND_PATTERNS),
)


# --------------------------------------------------------------------------
# Tracebacks: the exception type, the frames and the anomaly-mode block.

_RANK_PREFIX = re.compile(r"(?m)^\[(?:rank|default)\d{1,6}\]:[ ]?")  # torchrun's per-line prefix
_ANSI = re.compile(r"\x1b(?:\[[0-?]{0,64}[ -/]{0,16}[@-~]|\][^\x07\x1b\n]{0,4096}(?:\x07|\x1b\\)|[@-Z\\-_])")
_EXC_TYPE = re.compile(r"(?<![\w.])([A-Za-z_][\w.]{0,150}?(?:Error|Exception|Warning|Interrupt|Exit)):\s")
_ONLY_EXC_TYPE = re.compile(r"\s*([A-Za-z_][\w.]{0,150}?(?:Error|Exception|Warning)):\s*")
# Frame lines are matched whole (fullmatch) and are at most _LINE_CAP long; a lazy
# prefix is always followed by a tail that either fails at once or runs to the end.
_IN_FUNC = r"(?:, in (?P<func>[^\n]*))?"
_PY_FRAME = re.compile(r'\s*File "(?P<file>[^"\n]{1,4096})", line (?P<line>\d{1,9})' + _IN_FUNC + r"\s*")
_IPY_CELL = re.compile(r"\s*(?P<file>Cell In\s?\[\s?\d{1,9}\]), line (?P<line>\d{1,9})" + _IN_FUNC + r"\s*")
_IPY_FILE = re.compile(r"\s*File (?P<file>[^\n]{1,4096}?):(?P<line>\d{1,9}), in (?P<func>[^\n]*)")
_IPY_INPUT = re.compile(r"\s*(?P<file>Input In \[\s?\d{1,9}\]), in (?P<func>[^\n]*)")
_IPY_OLD = re.compile(r"(?P<file>\S[^\n]{0,4096}?) in (?P<func>[\w<>.]{1,200})(?:\([^\n]*)?")
_ARROW = re.compile(r"\s*-{1,20}>\s{0,8}(?P<line>\d{1,9})(?: (?P<code>[^\n]{0,4096}))?")
_CONTEXT = re.compile(r"\s*(?:-{1,20}>\s{0,8})?\d{1,9}(?: |$)")
_CARETS = re.compile(r"\s*[~^]{1,4096}\s*")
_TORCH_INTERNAL = re.compile(
    r"(?:^|/)(?:site|dist)-packages/(?:torch|functorch)/"
    r"|(?:^|/)torch/(?:_tensor\.py|autograd/|_ops\.py|overrides\.py|cuda/__init__\.py|nn/modules/module\.py)"
)
_ANOMALY = re.compile(r"Error\s+detected\s+in\s+(?P<node>" + _NAME + r")\.\s+"
                      + _w("Traceback of forward call that caused the error:"))
_INDUCED = re.compile(_w("Previous calculation was induced by") + r"\s+(?P<node>" + _NAME + r")\.")


def _frame(file: Optional[str], line: Optional[str], func: Optional[str]) -> dict:
    """Return one frame dict: file, line, function (without IPython's argument list), code."""
    if func is not None:
        func = func.strip()
        if "(" in func and not func.startswith("<"):
            func = func[: func.index("(")]  # IPython prints `in Tensor.backward(self, ...)`
    return {"file": file.strip() if file else file, "line": int(line) if line else None,
            "function": func, "code": None}


def _frames(lines: list, stop_at_other: bool = False) -> list:
    """Parse traceback frames (Python, IPython old and new) from ``lines``.

    With ``stop_at_other`` parsing ends at the first line that is neither a frame
    header nor its source line (the end of an anomaly-mode forward traceback).
    """
    frames: list = []
    pending: Optional[dict] = None  # a frame whose source line may follow
    for i, line in enumerate(lines):
        if len(line) > _LINE_CAP:
            pending = None
            continue
        m = _PY_FRAME.fullmatch(line)
        if m:
            pending = _frame(m["file"], m["line"], m["func"] or "<module>")
            pending["_py"] = len(line) - len(line.lstrip())  # its source line is indented deeper
            frames.append(pending)
            continue
        m = _IPY_CELL.fullmatch(line) or _IPY_INPUT.fullmatch(line) or _IPY_FILE.fullmatch(line)
        if m is None and not line[:1].isspace() and i + 1 < len(lines) and _CONTEXT.match(lines[i + 1]):
            m = _IPY_OLD.fullmatch(line)
        if m:
            gd = m.groupdict()
            pending = _frame(m["file"], gd.get("line"), gd.get("func") or "<module>")
            frames.append(pending)
            continue
        m = _ARROW.fullmatch(line)
        if m:
            if pending is None or "_py" in pending or pending["code"] is not None:
                pending = _frame(None, None, None)
                frames.append(pending)
            pending["line"], pending["code"] = int(m["line"]), (m["code"] or "").strip() or None
            continue
        if pending is not None and "_py" in pending and pending["code"] is None and line.strip() \
                and len(line) - len(line.lstrip()) > pending["_py"] and not _CARETS.fullmatch(line):
            pending["code"] = line.strip()
            continue
        if stop_at_other and not _CARETS.fullmatch(line) and not _CONTEXT.match(line):
            break
    for frame in frames:
        frame.pop("_py", None)
    return [f for f in frames if not (f["file"] and _TORCH_INTERNAL.search(f["file"].replace("\\", "/")))]


def _exception_type(text: str, start: int) -> tuple[Optional[str], int]:
    """Return the exception type printed before ``start`` and where its message begins."""
    lo = max(0, start - 400)
    nl = text.rfind("\n", lo, start)
    line_start = nl + 1 if nl >= 0 else lo
    found = None
    for found in _EXC_TYPE.finditer(text, line_start, start):
        pass
    if found is not None:
        return found[1], found.end()
    if nl >= 0 and not text[line_start:start].strip():  # "RuntimeError:" alone on the line above
        prev = text.rfind("\n", max(0, nl - 200), nl)
        m = _ONLY_EXC_TYPE.fullmatch(text, prev + 1 if prev >= 0 else max(0, nl - 200), nl)
        if m:
            return m[1], start
    return None, start


def _anomaly(text: str, before: int) -> dict:
    """Decode the anomaly-mode block nearest before ``before`` (else the last one)."""
    found = None
    for m in _ANOMALY.finditer(text):
        if found is not None and m.start() > before:
            break
        found = m
    if found is None:
        return {}
    block = text[found.end(): found.end() + 200_000].split("\n")[1:2000]
    out = {"anomaly_node": found["node"], "forward_frames": _frames(block, stop_at_other=True)}
    induced = [m["node"] for m in _INDUCED.finditer(text, found.end(), max(before, found.end()))]
    if induced:
        out["anomaly_induced_by"] = induced
    return out


def _traceback_frames(text: str, line_start: int) -> list:
    """Frames of the traceback that ends at the message line starting at ``line_start``."""
    header = text.rfind("Traceback (most recent call last)", 0, line_start)
    if header >= 0:
        region = text[text.find("\n", header, line_start) + 1: line_start]
        lines = region.split("\n")
    else:  # no header pasted: look at the lines just above the message
        lines = text[max(0, line_start - 20_000): line_start].split("\n")[-60:]
    return _frames(lines)


# --------------------------------------------------------------------------
# The entry points.


def _clean(text) -> str:
    """Return the scanned tail of ``text`` without ANSI codes, CR line ends or torchrun prefixes."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text[-4 * MAX_SCAN:]).decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        return ""
    text = text[-MAX_SCAN:]
    text = _ANSI.sub("", text).replace("\x1b", "")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _RANK_PREFIX.sub("", text) if "]:" in text else text


def _best_match(text: str):
    """Return ``(pattern, match, fields)`` for the last known message in ``text``."""
    best = None
    for pattern in _PATTERNS:
        last = deque(pattern.regex.finditer(text), maxlen=_TRIES)
        while last:
            m = last.pop()
            if best is not None and m.start() <= best[1].start():
                break
            fields = pattern.decode(m)
            if fields is not None:
                best = (pattern, m, fields)
                break
    return best


def parse(text: str) -> Optional[ParsedMessage]:
    """Recognise the last failure tensorscope knows in ``text``; ``None`` if there is none.

    ``text`` may be a bare message, a Python or IPython traceback, with ANSI
    colours, Windows line endings, prompts or log noise around it, and the
    anomaly-mode warning block. In a chained traceback the last exception wins;
    when that one is not known (a wrapper such as ``ValueError(...) from e``),
    the last known one before it is taken. Nothing in the text is ever executed.
    """
    text = _clean(text)
    best = _best_match(text)
    if best is None:
        return None
    pattern, m, fields = best
    exception_type, start = _exception_type(text, m.start())
    message = re.sub(r"\s*\n\s*", " ", text[start: m.end()]).strip()
    nl = text.rfind("\n", 0, m.start())
    line_start = nl + 1
    fields = dict(fields)
    anomaly = _anomaly(text, line_start)
    if anomaly:
        fields.update(anomaly)
        if pattern.kind == "inplace-modified-saved-tensor":
            _confirm_node(fields)
    return ParsedMessage(pattern.kind, exception_type, message, fields, _traceback_frames(text, line_start))


def _confirm_node(fields: dict) -> None:
    """Use the anomaly-mode node, the one that saved the tensor, to pin a guessed node name."""
    fields["anomaly_enabled"] = True
    fields["saved_by"] = fields["anomaly_node"]
    facts = _node_facts(fields["anomaly_node"])
    if fields.get("node_guessed") and facts["op"] == fields.get("op") and not facts["node_guessed"]:
        fields["node"], fields["node_guessed"] = facts["node"], False


def describe(parsed: ParsedMessage) -> dict:
    """Return the explanation of ``parsed``: its Kind's text with fixes made concrete.

    The result has ``kind``, ``title``, ``explanation``, ``causes``, ``fixes``
    (concrete ones first), ``evidence`` (sentences stating the decoded facts)
    and ``fields``.
    """
    kind = KINDS[parsed.kind]
    f = parsed.fields
    advise = _ADVICE.get(parsed.kind)
    title, evidence, concrete = advise(f) if advise else (None, [], [])
    fixes = list(concrete) + [fix for fix in kind.fixes if fix not in concrete]
    return {"kind": kind.code, "title": title or kind.title, "explanation": kind.explanation,
            "causes": list(kind.causes), "fixes": fixes, "evidence": evidence, "fields": dict(f)}


# --------------------------------------------------------------------------
# Concrete wording from decoded fields: fields -> (title or None, evidence, fixes).

# Ops whose backward saves their own output, so a write right after them breaks backward.
_SAVES_RESULT = {"Sigmoid", "Tanh", "Exp", "Exp2", "Expm1", "Relu", "LeakyRelu", "Elu", "Celu",
                 "Selu", "Softmax", "LogSoftmax", "Sqrt", "Rsqrt", "Reciprocal", "Threshold",
                 "Hardtanh", "Relu6"}
# Ops with an in-place variant: after `x.add_()` autograd shows x as an output of Add.
_INDEX_DTYPES = {"bool", "int64", "int32", "int16", "int8", "uint8"}
_HAS_INPLACE = {"Add", "Sub", "Mul", "Div", "Clamp", "Fill", "Zero", "MaskedFill", "IndexPut",
                "Copy", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Exp", "Pow", "Sqrt", "Neg",
                "Abs", "Addcmul", "Addcdiv", "Lerp", "Hardtanh", "Threshold", "Elu"}


def _snake(op: str) -> str:
    """Return the python spelling of an op name: ``LeakyRelu`` -> ``leaky_relu``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", op).lower()


def _where(frame: dict) -> str:
    """Return ``file:line (`code`)`` for a frame."""
    code = f" (`{frame['code']}`)" if frame.get("code") else ""
    return f"{frame.get('file') or '<input>'}:{frame.get('line')}{code}"


def _advise_inplace(f: dict):
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
                        f"last tracked in-place op on it (`{_snake(op)}_()`).")
    if f.get("node_guessed"):
        evidence.append(f"Its grad_fn is probably {f['node']} (newer PyTorch prints only the op name).")
    if f.get("saved_by"):
        frames = f.get("forward_frames") or []
        at = f"; its forward call was at {_where(frames[-1])}, so the write happened there or later" if frames else ""
        evidence.append(f"Anomaly mode: {f['saved_by']} saved it{at}.")
    if op == "AsStrided":
        fixes.append("The saved tensor is a view that was written through another alias (autograd then shows "
                     "it as AsStrided): do not write to it, its base or any view of the same storage before "
                     "backward(); clone the view when it is made (`v = base[...].clone()`).")
    elif op == "CopySlices":
        fixes.append("The saved tensor was last changed by an indexed assignment (`x[idx] = ...`): clone it "
                     "first (`x = x.clone(); x[idx] = ...`) or build the result out of place (`torch.where`).")
    elif op:
        name = _snake(op)
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


def _advise_no_grad_fn(f: dict):
    i = f.get("index", 0)
    return None, [f"Element {i} of the tensors passed to backward() or autograd.grad() has "
                  "requires_grad=False and no grad_fn."], []


def _advise_leaf(f: dict):
    if f.get("view_of_leaf"):
        return None, ["The tensor written is a view of a leaf that requires grad (e.g. `w[0] = ...` on a "
                      "parameter)."], ["Do the write under `torch.no_grad()`: `with torch.no_grad(): w[0] = 0.`"]
    return None, ["The tensor written is itself a leaf that requires grad (a parameter or a tensor made "
                  "with requires_grad=True)."], []


def _advise_view(f: dict):
    op, nr, reason = f.get("op"), f.get("output_nr"), f.get("reason")
    evidence, fixes = [], []
    if op:
        evidence.append(f"The view is output {nr} of {op}.")
    if f.get("base_modified"):
        evidence.append("Its base, or another view of its base, was written while the view was still used.")
    if reason == "multiple-views":
        name = _snake(op) if op else "the op"
        evidence.append(f"{op or 'The op'} returns several views, whose in-place modification autograd forbids.")
        fixes.append(f"Replace the in-place op on the outputs of {name} with the out-of-place one, or clone "
                     f"them first: `parts = [p.clone() for p in x.{name}(...)]`.")
    elif reason in ("no-grad-view", "inference-mode-view"):
        block = "torch.no_grad()" if reason == "no-grad-view" else "torch.inference_mode()"
        evidence.append(f"The view was created under `{block}` and written with grad mode enabled.")
        fixes.append(f"Take the view outside `{block}`, or do the write inside it too, or clone the view: "
                     "`v = v.clone()`.")
    elif reason == "custom-function":
        evidence.append(f"{op or 'A custom Function'} returned a view of (or exactly) its input.")
        fixes.append(f"Return a clone from {op or 'the Function'}.forward (`return x.clone()`), or clone the "
                     "result of `.apply(...)` before writing to it.")
    return None, evidence, fixes


def _advise_overlap(f: dict):
    if f.get("reason") == "input-overlap":
        return None, ["The tensor written overlaps the tensor being read."], [
            "Clone the source before the write: `dst.copy_(src.clone())`."]
    return None, ["Several elements of the tensor written share one memory location (expand or a stride-0 "
                  "view)."], ["Write to a copy: `x = x.clone()` (or `x.contiguous()`) before the in-place op."]


def _advise_non_scalar(f: dict):
    if f.get("dtype"):
        return None, [f"The output is {f['dtype']}: backward() without a gradient needs a real scalar."], [
            "Reduce to a real scalar: `out.abs().sum().backward()` or `out.real.sum().backward()`."]
    return None, [], []


_NON_FLOAT_FIX = {
    "factory": "Create it as floating point: `torch.tensor([1., 2.], requires_grad=True)`, "
               "`dtype=torch.float32`, or `nn.Parameter(t.float())`.",
    "requires_grad_": "Convert before asking for gradients: `x = x.float().requires_grad_()`.",
    "requires_grad-setter": "Convert before setting the flag: `x = x.float(); x.requires_grad = True`.",
    "data-setter": "Assign floating-point data (`x.data = y.float()`), or better "
                   "`with torch.no_grad(): x.copy_(y)`.",
}


def _advise_non_float(f: dict):
    fix = _NON_FLOAT_FIX.get(f.get("via"))
    return None, [], [fix] if fix else []


def _advise_device(f: dict):
    reason = f.get("reason")
    if reason and reason.startswith("no-") and reason != "no-cuda":
        backend = f.get("backend", "")
        return None, [f"This PyTorch build has no {backend} support."], [
            f"Use `device='cpu'`, or install a PyTorch build with {backend}."]
    if reason == "no-cuda":
        return None, ["This PyTorch build has no CUDA support (a CPU-only build)."], [
            "Use `device='cpu'`, or choose it at run time: "
            "`device = 'cuda' if torch.cuda.is_available() else 'cpu'`; or install a CUDA build of PyTorch."]
    devices = f.get("devices") or []
    if len(devices) < 2:
        return None, [], []
    target = next((d for d in devices if d != "cpu"), devices[0])
    if reason == "input-weight":
        return None, [f"The input is on {devices[0]} but the layer's weight is on {devices[1]}."], [
            "Move the input to the layer's device: `x = x.to(next(model.parameters()).device)`, "
            "or move the model: `model.to(device)`."]
    op = f" {f['op']}" if f.get("op") else ""
    evidence = [f"The op{op} received tensors on {devices[0]} and {devices[1]}."]
    arg = f.get("argument")
    if arg:
        evidence.append(f"Its argument `{arg}` is on {devices[1]}.")
        return None, evidence, [f"Move `{arg}` to {target}: `{arg} = {arg}.to('{target}')`."]
    return None, evidence, [f"Move the tensors of this op to one device, e.g. `.to('{target}')`, "
                            "or create them with `device=`."]


def _advise_other(f: dict):
    reason = f.get("reason")
    if reason == "as-strided-out-of-bounds":
        return ("as_strided asked for a view that reaches past the end of its storage.",
                [f"Sizes {f['sizes']}, strides {f['strides']}, storage offset {f['storage_offset']} and "
                 f"itemsize {f['itemsize']} need {f['required_nbytes']} bytes; the storage has "
                 f"{f['storage_nbytes']}."],
                ["Check the sizes and strides given to `as_strided` (the last element sits at offset + "
                 "sum((size - 1) * stride)); prefer `view`, `expand`, `narrow` or `unfold`, which check shapes."])
    if reason == "expand-size-mismatch":
        sizes = f" (target sizes {f['target_sizes']}, tensor sizes {f['sizes']})" if f.get("sizes") else ""
        return ("expand was asked to change a dimension whose size is not 1.",
                [f"Dimension {f['dim']} has size {f['existing_size']}; expand asked for "
                 f"{f['target_size']}{sizes}."],
                ["expand only grows dimensions of size 1: `unsqueeze` a size-1 dimension first, use "
                 "`repeat` to copy the data, or fix the target sizes."])
    if reason == "inference-tensor-inplace":
        return ("A tensor created in inference mode was modified in place outside it.", [],
                ["Clone it before writing (`x = x.clone()`), or create it under `torch.no_grad()` "
                 "instead of `torch.inference_mode()`."])
    return None, [], []


def _advise_ddp_unused(f: dict):
    evidence, fixes = [], []
    if f.get("names"):
        evidence.append(f"Rank {f.get('rank')}: no gradient for {', '.join(f['names'])}.")
    elif f.get("indices"):
        evidence.append(f"Rank {f.get('rank')}: no gradient for the parameters at indices "
                        f"{' '.join(map(str, f['indices']))} of the model's parameters that require grad "
                        "(in `named_parameters()` order).")
    if f.get("reason") == "static-graph":
        fixes.append("The graph changed between iterations under `static_graph=True`: drop `static_graph=True`, "
                     "or make every iteration use the same parameters.")
    return None, evidence, fixes


def _advise_ddp_ready_twice(f: dict):
    evidence = []
    if f.get("index") is not None:
        name = f" (`{f['name']}`)" if f.get("name") else ""
        evidence.append(f"The parameter at index {f['index']}{name} received two gradients in one iteration.")
    return None, evidence, []


_ADVICE = {
    "ddp-unused-parameters": _advise_ddp_unused,
    "ddp-mark-ready-twice": _advise_ddp_ready_twice,
    "inplace-modified-saved-tensor": _advise_inplace,
    "no-grad-fn": _advise_no_grad_fn,
    "leaf-inplace": _advise_leaf,
    "view-inplace": _advise_view,
    "overlapping-write": _advise_overlap,
    "non-scalar-backward": _advise_non_scalar,
    "non-float-requires-grad": _advise_non_float,
    "device-mismatch": _advise_device,
    "other": _advise_other,
    **_KIND_ADVICE,
}
