"""Saved-tensor hooks of ``tensorscope explain``: who saved what, and PyTorch's checks redone.

NOTE [Hooks only under explain]
Registering any default ``saved_tensors_hooks`` changes what a program can see
(torch 2.13, verified): ``grad_fn._raw_saved_x.unpack_hook`` is our function,
``_raw_saved_x.register_hooks`` raises "Calling register_hooks on a saved tensor
whose hooks have already been set", ``grad_fn._saved_x is x`` turns False for an
input that requires grad, and ``SavedVariable::unpack`` skips its own checks.
So ``tensorscope run`` registers none (its failure path reads the graph instead,
see ``tensorscope/instrument/stale.py``), and only ``explain``, which needs the
saving line, the version at save and the silent writes, pushes these hooks.

NOTE [Saved-tensor hooks switch off the version check]
With hooks, ``SavedVariable::unpack`` (torch/csrc/autograd/saved_variable.cpp)
skips two checks, which ``unpack`` below redoes with PyTorch's exact text:
the detached-in-place check ("Trying to use a saved tensor that has been detached
in-place", for a saved non-leaf input whose ``grad_fn`` is gone; PyTorch raises it
only where the unpack passes no ``saved_for`` node: generated C++ nodes, not the
``_saved_x`` getter nor ``ctx.saved_tensors``), then the version check (a nested
tensor's sizes printed as ATen prints a tensor; an input names output 0 of its
current ``grad_fn``, as ``output_nr_`` is only saved for outputs). The check for
freed saved tensors stays PyTorch's own (freeing also drops the hooks).

What the pack hook returns mirrors what a ``SavedVariable`` keeps without hooks:
the original tensor for inputs and leaves (``saved_original_``), and a detached
alias that shares storage and version counter for a node's own outputs (holding
the output itself would make a reference cycle through C++ that never dies).
Writes that go through ``x.data = y`` therefore reach the saved input exactly
as they would without us.

NOTE [Tensors we do not inspect]
A ``__torch_dispatch__`` wrapper subclass (LoggingTensor, TwoTensor, DTensor,
FakeTensor, FunctionalTensor), a nested, sparse, meta or quantized tensor is
packed as PyTorch keeps it and never read: an input is kept as it is, an output
is detached through its own ``__torch_dispatch__`` (PyTorch's ``tensor_data()``
calls the subclass's ``detach`` too: a LoggingTensor logs the same ops with or
without tensorscope). Detaching with the Python dispatch key excluded gives a
tensor without real data, and backward then crashes the process (SIGSEGV).

NOTE [Fingerprints of saved tensors]
A write that does not bump the version counter (NumPy through shared memory, a
C++/CUDA kernel, ``.data``, a BatchNorm running statistic, ``x.data = y``) leaves
PyTorch's check blind. With values checked (``explain``, ``run --check-values``)
the pack hook takes a checksum of the saved bytes on their device, and unpack
takes it again: a different sum at an unchanged version is a silent write.
``checksum`` views the bytes as the integer type of the same size (no copy, any
strides) and sums them times odd weights that depend on the position (so a
single changed element always changes the sum, and swapped elements almost
always do); products and sums wrap around, which is what a hash wants. Measured
against an exact copy of each saved tensor (README, Silent writes): the copy
doubles the memory autograd keeps, the checksum costs one multiply and one
reduction per save and per unpack, and 8 bytes. Nothing is read on the host:
the comparison is a 0-dim tensor on the device, read at once on the CPU and
after the program has ended on CUDA (no synchronisation while it runs).
"""

from __future__ import annotations

import re
import sys
import threading
from contextlib import contextmanager
from typing import NamedTuple

import torch

from tensorscope import compat
from tensorscope.instrument import state

_get_ident = threading.get_ident
_PAUSED = state.PAUSED  # see NOTE [Pausing the recorder] in tracker.py
from tensorscope.instrument.fingerprint import checksum
from tensorscope.instrument.quiet import profiling as _profiling
from tensorscope.instrument.quiet import quiet as _quiet, quiet_tf as _quiet_tf
from tensorscope.instrument.quiet import unrecorded as _unrecorded
from tensorscope.instrument.recorder import inspectable
from tensorscope.instrument.watch import exposed_input

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_detach = torch._C.TensorBase.detach
_PYTHON_KEY = torch._C.DispatchKey.Python
_dispatch_keys = torch._C._dispatch_keys
_BASE_TD = getattr(_Tensor.__torch_dispatch__, "__func__", _Tensor.__torch_dispatch__)
# In-place ops that change only a tensor's sizes/strides: they bump its version (so a saved output
# made stale by one has a culprit to name) but write no bytes (never a silent write of data).
METADATA_INPLACE = ("squeeze_", "unsqueeze_", "t_", "transpose_", "swapaxes_", "swapdims_", "as_strided_")
NO_DATA_WRITES = frozenset(("detach_",) + METADATA_INPLACE)
DETACHED_IN_PLACE = ("Trying to use a saved tensor that has been detached in-place, i.e. with .detach_()."
                     "This is not supported, please use out-of-place `.detach()` instead")
_get_sequence_nr = torch._C._autograd._get_sequence_nr
_BACKWARD_NUMBER = re.compile(r"Backward(\d*)$")


class Packed:
    """What autograd keeps for one saved tensor while our hooks are active."""

    __slots__ = ("tensor", "version", "is_output", "node", "output_nr", "seq_nr", "file", "line",
                 "storage_key", "orig", "tid", "writes", "silent", "fingerprint", "check_detached",
                 "kind", "changed_at", "style", "__weakref__")

    def __init__(self, tensor, version, style=None):
        self.tensor = tensor
        self.version = version
        self.style = style  # the MessageStyle of the run that saved it (its unpack may come after the run)
        self.check_detached = False  # a non-leaf input: PyTorch refuses it once detached in place
        self.kind = None  # set for a tensor type we leave uninspected
        self.fingerprint = None  # checksum of the saved bytes at pack (see NOTE [Fingerprints of saved tensors])
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
        self.changed_at = None  # (file, line) that changed the bytes unseen (see NOTE [Watching exposed saved bytes])


def forward_op_name(node_name: str, names_node: bool = False) -> str:
    """``SigmoidBackward0`` -> ``Sigmoid``, as 2.13 names the forward op in its message.

    Earlier releases (2.11, say) name the node itself (``names_node``: the running torch's own
    style, learnt by ``learn_message_style``).
    """
    if names_node:
        return node_name
    # 2.13 drops "Backward0" but keeps another overload's number: ClampBackward1 -> "Clamp1",
    # DivBackward2 -> "Div2", a custom Function's "ScaleBackward" -> "Scale" (measured)
    m = _BACKWARD_NUMBER.search(node_name)
    if m is None:
        return node_name
    return node_name[:m.start()] + ("" if m.group(1) == "0" else m.group(1))


# NOTE [The version check's text comes from the running torch]
# The redone version check must print the text the running PyTorch prints, and that text
# changed between releases (2.13 names the forward op, "output 0 of Sigmoid"; 2.11 the node,
# "output 0 of SigmoidBackward0"; the hint's wording moves too). Rather than a table of
# releases, one real version error is provoked before the program runs (before our wrappers
# and hooks go in, on a one-element CPU tensor, no RNG touched) and its style is kept by the run
# (``Tracker.message_style``) and by each tensor it saves (an unpack may come after the run).
class MessageStyle(NamedTuple):
    names_node: bool  # "output 0 of SigmoidBackward0" (2.11) rather than "output 0 of Sigmoid" (2.13)
    hint: str  # what follows "... expected version N instead."


STYLE_2_13 = MessageStyle(False, " Hint: enable anomaly detection to find the operation that failed to compute "
                                 "its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")


def learn_message_style() -> MessageStyle:
    """The running torch's style of the version error (one probe), or 2.13's where none can be made."""
    # in a thread of its own, away from the program's saved-tensor hooks: see
    # NOTE [The version check is learnt in a fresh thread] in compat.py
    found: list = []
    compat.in_fresh_thread(lambda: found.append(_probe()))
    return (found[0] if found else None) or STYLE_2_13


def _probe() -> MessageStyle | None:
    # NOTE [No backward before the program]
    # The saved output is unpacked through the node's ``_saved_result`` property, not by a backward: the
    # property runs the same check and raises the same text (measured on 2.2.2, 2.6.0, 2.9.1, 2.13.0 and
    # 2.15.0). A backward would run autograd's engine, whose first graph task on a machine with a GPU
    # starts one thread per device and registers a fork handler that marks every child forked afterwards:
    # the child's first backward (hogwild training with fork, a forked worker that trains) then fails with
    # "Unable to handle autograd's threading in combination with fork-based multiprocessing", where under
    # python, whose parent ran no backward before forking, it trains. The threads also make the process
    # multi-threaded at a fork (Python 3.12+ warns). tensorscope runs no backward of its own, ever.
    try:
        with torch.enable_grad(), torch.inference_mode(False), torch.autograd.set_detect_anomaly(False):
            a = torch.ones(1, requires_grad=True)
            out = a.sigmoid()
            node = out.grad_fn
            out.mul_(1)
            node._saved_result
    except RuntimeError as e:
        text = str(e)
        if " instead." in text:
            return MessageStyle("of SigmoidBackward" in text, text.split(" instead.", 1)[1])
    return None


def version_error_message(p: Packed) -> str:
    """The exact text of PyTorch's saved-variable version check (torch 2.13)."""
    t = p.tensor
    style = p.style or STYLE_2_13
    with _quiet_tf():
        sizes = nested_sizes_text(t) + "]" if t.is_nested else "[" + ", ".join(str(s) for s in t.shape) + "]]"
        msg = ("one of the variables needed for gradient computation has been modified by an inplace "
               f"operation: [{t.type()} {sizes}")
        if p.is_output:
            msg += f", which is output {p.output_nr} of {forward_op_name(p.node, style.names_node)},"
        else:
            gf = t.grad_fn
            if gf is not None:
                # output_nr_ is saved only for outputs: a saved input always says "output 0"
                msg += f", which is output 0 of {forward_op_name(gf.name(), style.names_node)},"
    msg += f" is at version {t._version}; expected version {p.version} instead."
    if torch.is_anomaly_enabled():
        msg += (" Hint: the backtrace further above shows the operation that failed to compute its "
                "gradient. The variable in question was changed in there or anywhere later. Good luck!")
    else:
        msg += style.hint
    return msg


def nested_sizes_text(t) -> str:
    """A nested tensor's sizes as ``SavedVariable::unpack`` writes them: ATen's printout of the
    ``_nested_tensor_size()`` tensor (each entry right-aligned to the widest, a footer line)."""
    with _quiet():  # the components' shapes: metadata, no value read
        rows = [list(c.shape) for c in torch._C.TensorBase.unbind(t)]
    width = max((len(str(abs(v))) for row in rows for v in row), default=1) + 1
    body = "".join(" ".join(str(v).rjust(width) for v in row) + "\n" for row in rows)
    cols = len(rows[0]) if rows else 0
    return f"{body}[ torch.LongTensor{{{len(rows)},{cols}}} ]"


def unusual(t) -> str | None:
    """None for a tensor we inspect; else what it is (see NOTE [Tensors we do not inspect])."""
    kind = type(t)
    if kind is not _Tensor and kind is not _Parameter:
        td = getattr(kind, "__torch_dispatch__", None)
        if getattr(td, "__func__", td) is not _BASE_TD or _dispatch_keys(t).has(_PYTHON_KEY):
            return kind.__name__
    if t.is_nested:
        return "nested tensor"
    if t.layout != torch.strided:
        return f"{str(t.layout).replace('torch.', '')} tensor"
    if t.is_meta:
        return "meta tensor"
    if t.is_quantized:
        return "quantized tensor"
    return None


def pack(t):
    try:
        if type(t) is _Tensor:
            kind = unusual(t)
        else:
            with _quiet_tf():  # a subclass's __torch_function__ must not see our reads
                kind = unusual(t)
    except Exception:
        kind = "tensor"
    if kind is not None:
        return _pack_as_pytorch(t, kind)
    if type(t) is not _Tensor or _dispatch_modes():
        if _profiling():
            with _unrecorded(_quiet()):
                return _pack(t)
        with _quiet():
            return _pack(t)
    if _profiling():  # our detach and checks unseen by the program's profiler (NOTE in quiet.py)
        with _unrecorded():
            return _pack(t)
    return _pack(t)


def _pack_as_pytorch(t, kind):
    """Keep a tensor we do not inspect as a SavedVariable keeps it; record nothing but its type."""
    with _quiet_tf():
        gf = t.grad_fn
        is_output = gf is not None and gf._sequence_nr() == _get_sequence_nr() - 1
        rec = state.recorder
        style = rec.message_style if rec is not None else None
        if is_output and not t.is_leaf:
            p = Packed(_detach(t), t._version, style)  # through the subclass's own __torch_dispatch__
            p.is_output = True
            p.node = gf.name()
            p.output_nr = t.output_nr
        else:
            p = Packed(t, t._version, style)
            p.check_detached = gf is not None
    p.kind = kind
    if rec is not None and rec.active:
        try:
            rec.note(f"tensors saved for backward that tensorscope leaves uninspected: {kind}")
        except Exception:
            pass
    return p


_dispatch_modes = torch._C._len_torch_dispatch_stack


def _pack(t):
    try:
        gf = t.grad_fn
        seq = _get_sequence_nr() - 1
        is_output = gf is not None and gf._sequence_nr() == seq
    except Exception:
        gf, seq, is_output = None, None, False
    rec = state.recorder
    style = rec.message_style if rec is not None else None
    if is_output:
        p = Packed(_detach(t), t._version, style)
        p.is_output = True
        try:
            p.node = gf.name()
            p.output_nr = t.output_nr
        except Exception:
            pass
    else:
        p = Packed(t, t._version, style)
        p.check_detached = gf is not None
    p.seq_nr = seq
    if rec is not None and rec.active and not (_PAUSED and _get_ident() in _PAUSED) and (type(t) is _Tensor or inspectable(t)):
        checks = rec.saved_checks
        try:
            checks.on_pack(p, t, sys._getframe(1))
        except Exception:
            pass
        if rec.check_values:
            try:
                p.fingerprint = checksum(p.tensor)
            except Exception:
                p.fingerprint = None
            if p.fingerprint is not None and (p.storage_key in checks.numpy_shared
                                              or exposed_input(p, t) and not _alone(_holders(t))):
                rec.watch.watch(p, fresh=True)
    elif _alone_probe is not None and exposed_input(p, t):
        _alone_probe.append(_holders(t))  # learn_alone(): measured at the same depth as above
    return p


# NOTE [Saved tensors no one else holds]
# A saved input with no grad_fn that requires no grad looks like a buffer (watch.exposed_input), but many
# are not: the outputs autograd saves that are not differentiable, such as LayerNorm's mean and rstd or a
# training BatchNorm's batch statistics, are made inside the op and held by nothing but the saved record.
# No line of the program can write them, so watching them line by line (18 of them per step of a small GPT,
# each checked at every line its forward runs) would cost more than the rest of explain and could never
# name a writer. Such a tensor is told at pack by how many hold it: Python references to it and tensors on
# its storage. The counts of a tensor made inside the op are learnt once per run from a real one (a
# layer_norm's mean, packed by these hooks in a fresh thread before the program runs), so no count is
# written in for a Python or torch release. A tensor some name, buffer or view also holds counts more. One
# held only from C++ code with no Python reference would pass for unheld: its writes are still found at
# unpack by the fingerprint; only the line is not watched for.
_alone_probe: list | None = None
_ALONE: tuple | None = None  # (references, storage uses) of a tensor held only by the op that saved it
_storage_uses = getattr(torch._C, "_storage_Use_Count", None)
_storage_address = compat.storage_key


def _holders(t) -> tuple:
    uses = _storage_uses(_storage_address(t)) if _storage_uses is not None else None
    return sys.getrefcount(t), uses


def _alone(counts) -> bool:
    alone = _ALONE
    return alone is not None and counts[1] is not None and counts[0] <= alone[0] and counts[1] <= alone[1]


def learn_alone() -> None:
    """Measure what holds a tensor made inside an op when our pack hook sees it (NOTE [Saved tensors no one
    else holds]); on failure nothing is taken for unheld."""
    global _ALONE
    found: list = []

    def run():
        global _alone_probe
        _alone_probe = found
        push()
        try:
            with torch.enable_grad(), torch.inference_mode(False):
                x = torch._C._VariableFunctions.ones((2, 4), requires_grad=True)
                torch.nn.functional.layer_norm(x, (4,))  # saves its mean and rstd: made inside the op
        except Exception:
            found.clear()
        finally:
            pop()
            _alone_probe = None

    compat.in_fresh_thread(run)
    _ALONE = min(found) if len(found) == 2 and found[0] == found[1] and found[0][1] is not None else None


def unpack(p):
    t = p.tensor
    if p.check_detached and _detached_in_place(t):
        rec = state.recorder
        if rec is not None:
            try:
                rec.saved_checks.on_detached_unpack(p)
            except Exception:
                pass
        raise RuntimeError(DETACHED_IN_PLACE)
    if t._version != p.version:
        rec = state.recorder
        if rec is not None:
            try:
                rec.saved_checks.on_stale_unpack(p)
            except Exception:
                pass
        raise RuntimeError(version_error_message(p))
    if p.fingerprint is not None or p.silent is not None or (not p.is_output and p.storage_key is not None):
        rec = state.recorder
        if rec is not None:
            try:
                rec.saved_checks.on_unpack_check_silent(p)
            except Exception:
                pass
    return t


_current_node = torch._C._current_autograd_node


def _detached_in_place(t) -> bool:
    """The saved non-leaf input lost its grad_fn (``detach_()``), and the unpack is one PyTorch
    makes without a ``saved_for`` node: a generated (C++) node running in backward."""
    if type(t) is _Tensor:
        if t.grad_fn is not None:
            return False
    else:
        with _quiet_tf():
            if t.grad_fn is not None:
                return False
    node = _current_node()
    return node is not None and not hasattr(node, "_forward_cls")


def hooks_on_top() -> bool:
    return compat.top_pack_hook() is pack  # see NOTE [Which saved-tensor hooks are on top]


def push() -> None:
    compat.push_saved_tensors_hooks(pack, unpack)


def pop() -> None:
    compat.pop_saved_tensors_hooks()


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
    values = None
    if ours:
        pop()
        rec = state.recorder
        if rec is not None:
            rec.features.add("torch.func")
            if rec.values is not None and rec.values.enter_transform():  # no saves to walk: see nonfinite.py
                values = rec.values
    try:
        with _original_disable(error_message):
            yield
    finally:
        if values is not None:
            values.exit_transform()
        if ours:
            push()

