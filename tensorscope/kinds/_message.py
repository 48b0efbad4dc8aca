"""Pieces of PyTorch's message wording that several kinds' patterns and advice share (torch-free).

NOTE [Bounded patterns]: every pattern is anchored on a literal phrase and uses bounded
repetition, so matching a pasted text stays linear in its size.
"""

from __future__ import annotations

import re
from typing import Optional

#: A device as messages print it: ``cpu``, ``cuda:0``, ``meta``.
DEV = r"[A-Za-z_]\w{0,30}(?::\d{1,6})?"
#: A printed list of integers, without its brackets: ``4, 512, 16``.
INTS = r"[-\d,\s]{0,400}"
#: A node or op name as autograd prints it: ``SigmoidBackward0``, ``torch::autograd::CopySlices``.
NAME = r"[\w:<>]{1,300}"

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


def decode_type(name: str) -> tuple[Optional[str], Optional[str]]:
    """Return ``(dtype, device)`` for a tensor type name such as ``torch.cuda.FloatTensor``."""
    m = _LEGACY.fullmatch(name) or _DISPATCH.fullmatch(name)
    if not m:
        return None, None
    dev = (m["dev"] or "cpu").lower()
    return _SCALAR.get(m["scalar"]), _DEVICE_OF.get(dev, dev)


def ints(text: Optional[str]) -> list:
    """Return the integers in a printed list such as ``[4, 512, 16, 16]``."""
    return [int(x) for x in re.findall(r"-?\d{1,19}", text or "")]


def node_facts(name: str) -> dict:
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


def snake(op: str) -> str:
    """Return the python spelling of an op name: ``LeakyRelu`` -> ``leaky_relu``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", op).lower()


def frame_where(frame: dict) -> str:
    """Return ``file:line (`code`)`` for a traceback frame."""
    code = f" (`{frame['code']}`)" if frame.get("code") else ""
    return f"{frame.get('file') or '<input>'}:{frame.get('line')}{code}"
