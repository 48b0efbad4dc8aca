"""Fingerprints of saved tensors: a checksum of a tensor's bytes on its device.

See NOTE [Fingerprints of saved tensors] in saved.py. The weights are a cache of constants per
(size, dtype, device), shared by every run of the process: they depend on nothing a program does.
"""

from __future__ import annotations

import torch

from tensorscope.instrument.quiet import profiling as _profiling
from tensorscope.instrument.quiet import quiet as _quiet
from tensorscope.instrument.quiet import unrecorded as _unrecorded

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_dispatch_modes = torch._C._len_torch_dispatch_stack
_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_PERIOD = 1 << 20  # weights kept per (dtype, device): at most 8 MiB each
_weights: dict = {}
_Base = torch._C.TensorBase
_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_arange = torch._C._VariableFunctions.arange  # not the wrapped factory


def _weights_for(n, dtype, device):
    key = (n, dtype, device)
    w = _weights.get(key)
    if w is not None:
        return w
    full = _weights.get((dtype, device))
    if full is None or full.numel() < n:
        size = min(_PERIOD, max(n, 1024, 2 * (full.numel() if full is not None else 0)))
        # odd weights 2*i*K + 1, wrapped into the dtype: a changed element always changes its product
        full = _Base.to(_Base.add(_Base.mul(_arange(size, dtype=torch.int64, device=device), 2 * 2654435761), 1), dtype)
        _weights[(dtype, device)] = full
    w = _Base.narrow(full, 0, 0, n)
    if len(_weights) < 4096:  # prefixes by size: a training loop saves the same few sizes
        _weights[key] = w
    return w


_tf_modes = torch._C._is_torch_function_mode_enabled


def checksum(t):
    """A 0-dim integer tensor on ``t``'s device: a position-weighted sum of ``t``'s bytes.

    See NOTE [Fingerprints of saved tensors]. Invisible to the program's modes, subclasses and profiler.
    """
    if _dispatch_modes() or _tf_modes() or (type(t) is not _Tensor and type(t) is not _Parameter):
        if _profiling():  # NOTE [Our ops unseen by the program's profiler] in quiet.py
            with _unrecorded(_quiet()):
                return _checksum(t)
        with _quiet():
            return _checksum(t)
    if _profiling():
        with _unrecorded():
            return _checksum(t)
    return _checksum(t)


def _flat(x):
    """``x``'s elements as one dimension: a view where its memory is dense in some order of its dims."""
    if x.is_contiguous():
        return _Base.view(x, (-1,))
    order = sorted(range(x.dim()), key=lambda d: (-x.stride(d), -x.size(d)))
    y = _Base.permute(x, order)
    if y.is_contiguous():
        return _Base.view(y, (-1,))
    return _Base.reshape(x, (-1,))


def _checksum(t):
    # viewed as an integer dtype, the result neither requires grad nor has a grad_fn
    x = _Base.view(t, _INT_OF_SIZE[t.element_size()])
    n = x.numel()
    if n <= _PERIOD:
        w = _weights_for(n, x.dtype, x.device)
        if x.element_size() >= 4 and x.device.type == "cpu":
            # one op, no temporary: 3-5x cheaper than mul + sum on the small tensors a loop saves; a
            # non-contiguous tensor is read in memory order where it is a permutation of dense memory (a
            # Linear's saved ``weight.t()``), else copied into logical order first (NOTE [Fingerprints of
            # saved tensors]: only the same tensor's two sums are compared, so any fixed order will do)
            return _Base.dot(_flat(x), w)
        return _Base.sum(_Base.mul(x, _Base.view(w, x.shape)), dtype=torch.int64)
    # larger: rows of _PERIOD elements, each row's sum weighted again by its row number
    flat = _Base.reshape(x, (-1,))
    rows = n // _PERIOD
    head = _Base.view(_Base.narrow(flat, 0, 0, rows * _PERIOD), (rows, _PERIOD))
    per_row = _Base.sum(_Base.mul(head, _weights_for(_PERIOD, x.dtype, x.device)), 1, dtype=torch.int64)
    row_w = _Base.add(_Base.mul(_arange(rows, dtype=torch.int64, device=x.device), 2 * 40503), 1)
    total = _Base.sum(_Base.mul(per_row, row_w))
    rest = n - rows * _PERIOD
    if rest:
        tail = _Base.narrow(flat, 0, rows * _PERIOD, rest)
        total = _Base.add(total, _Base.sum(_Base.mul(tail, _weights_for(rest, x.dtype, x.device)), dtype=torch.int64))
    return total

