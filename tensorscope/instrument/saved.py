"""Saved-tensor hooks that remember who saved what, and redo PyTorch's version check.

NOTE [Saved-tensor hooks switch off the version check]
Registering any default ``saved_tensors_hooks`` makes ``SavedVariable::unpack``
skip its own version check. Our unpack hook therefore repeats it and raises the
byte-identical ``RuntimeError`` text (see ``version_error_message``), so the
program fails exactly where and how it would under plain python.

What the pack hook returns mirrors what a ``SavedVariable`` keeps without hooks:
the original tensor for inputs and leaves (``saved_original_``), and a detached
alias that shares storage and version counter for a node's own outputs (holding
the output itself would make a reference cycle through C++ that never dies).
Writes that go through ``x.data = y`` therefore reach the saved input exactly
as they would without us.
"""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager

import torch

from tensorscope.instrument import state
from tensorscope.instrument.recorder import inspectable

_Tensor = torch.Tensor
_detach = torch._C.TensorBase.detach
_get_sequence_nr = torch._C._autograd._get_sequence_nr
_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")


class Packed:
    """What autograd keeps for one saved tensor while our hooks are active."""

    __slots__ = ("tensor", "version", "is_output", "node", "output_nr", "seq_nr", "file", "line",
                 "storage_key", "orig", "tid", "writes", "silent", "__weakref__")

    def __init__(self, tensor, version):
        self.tensor = tensor
        self.version = version
        self.is_output = False
        self.node = None
        self.output_nr = 0
        self.seq_nr = None
        self.file = None
        self.line = None
        self.storage_key = None
        self.orig = None
        self.tid = None
        self.writes = None
        self.silent = None


def forward_op_name(node_name: str) -> str:
    """``SigmoidBackward0`` -> ``Sigmoid``, as 2.13 names the forward op in its message."""
    return _BACKWARD_SUFFIX.sub("", node_name)


def version_error_message(p: Packed) -> str:
    """The exact text of PyTorch's saved-variable version check (torch 2.13)."""
    t = p.tensor
    sizes = "[" + ", ".join(str(s) for s in t.shape) + "]"
    msg = ("one of the variables needed for gradient computation has been modified by an inplace "
           f"operation: [{t.type()} {sizes}]")
    if p.is_output:
        msg += f", which is output {p.output_nr} of {forward_op_name(p.node)},"
    else:
        gf = t.grad_fn
        if gf is not None:
            msg += f", which is output {t.output_nr} of {forward_op_name(gf.name())},"
    msg += f" is at version {t._version}; expected version {p.version} instead."
    if torch.is_anomaly_enabled():
        msg += (" Hint: the backtrace further above shows the operation that failed to compute its "
                "gradient. The variable in question was changed in there or anywhere later. Good luck!")
    else:
        msg += (" Hint: enable anomaly detection to find the operation that failed to compute its "
                "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")
    return msg


def pack(t):
    if type(t) is not _Tensor or _dispatch_modes():
        with _quiet():
            return _pack(t)
    return _pack(t)


class _quiet:
    """Our own reads and detach invisible to the program's __torch_function__ and dispatch modes
    (autograd saves a tensor in C++ without either seeing it)."""

    __slots__ = ("guards",)

    def __enter__(self):
        self.guards = (torch._C.DisableTorchFunctionSubclass(),
                       torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python)))
        for g in self.guards:
            g.__enter__()

    def __exit__(self, *exc):
        for g in reversed(self.guards):
            g.__exit__(*exc)


_dispatch_modes = torch._C._len_torch_dispatch_stack


def _pack(t):
    try:
        gf = t.grad_fn
        seq = _get_sequence_nr() - 1
        is_output = gf is not None and gf._sequence_nr() == seq
    except Exception:
        gf, seq, is_output = None, None, False
    if is_output:
        p = Packed(_detach(t), t._version)
        p.is_output = True
        try:
            p.node = gf.name()
            p.output_nr = t.output_nr
        except Exception:
            pass
    else:
        p = Packed(t, t._version)
    p.seq_nr = seq
    rec = state.recorder
    if rec is not None and rec.active and (type(t) is _Tensor or inspectable(t)):
        try:
            rec.on_pack(p, t, sys._getframe(1))
        except Exception:
            pass
    return p


def unpack(p):
    t = p.tensor
    if t._version != p.version:
        rec = state.recorder
        if rec is not None:
            try:
                rec.on_stale_unpack(p)
            except Exception:
                pass
        raise RuntimeError(version_error_message(p))
    if p.silent is not None or (not p.is_output and p.storage_key is not None):
        rec = state.recorder
        if rec is not None:
            try:
                rec.on_unpack_check_silent(p)
            except Exception:
                pass
    return t


def hooks_on_top() -> bool:
    top = torch._C._autograd._top_saved_tensors_default_hooks(False)
    return top is not None and top[0] is pack


def push() -> None:
    torch._C._autograd._push_saved_tensors_default_hooks(pack, unpack)


def pop() -> None:
    torch._C._autograd._pop_saved_tensors_default_hooks()


_original_disable = torch.autograd.graph.disable_saved_tensors_hooks


@contextmanager
def disable_saved_tensors_hooks(error_message):
    """``torch.autograd.graph.disable_saved_tensors_hooks`` that steps our hooks aside.

    ``torch.func.grad``/``vjp``/``jacrev``/``hessian`` refuse to run while any
    saved-tensor hook is registered. When ours are the only ones on top, they
    are popped for the duration, so the transforms run exactly as without
    tensorscope (their inner saves are then not inspected).
    """
    ours = hooks_on_top()
    if ours:
        pop()
        rec = state.recorder
        if rec is not None:
            rec.features.add("torch.func")
    try:
        with _original_disable(error_message):
            yield
    finally:
        if ours:
            push()

