"""tensorscope's own reads of a tensor, invisible to the program's subclasses and modes.

A program's ``__torch_function__`` subclass or ``TorchDispatchMode`` must not see tensorscope read
``.shape`` or take a checksum: each guard here switches those off for the reads inside it.
"""

from __future__ import annotations

import torch


class quiet_tf:
    """Our reads invisible to the program's __torch_function__, with its __torch_dispatch__ left on."""

    __slots__ = ("guard",)

    def __enter__(self):
        self.guard = torch._C.DisableTorchFunctionSubclass()
        self.guard.__enter__()

    def __exit__(self, *exc):
        self.guard.__exit__(*exc)


class quiet:
    """Our own reads and detach invisible to the program's __torch_function__ and dispatch modes
    (autograd saves a tensor in C++ without either seeing it)."""

    __slots__ = ("guards",)
    _function_guard = torch._C.DisableTorchFunctionSubclass

    def __enter__(self):
        self.guards = (self._function_guard(),
                       torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python)))
        for g in self.guards:
            g.__enter__()

    def __exit__(self, *exc):
        for g in reversed(self.guards):
            g.__exit__(*exc)


class quiet_all(quiet):
    """``quiet()`` with the program's torch-function modes switched off too (``torch.device(...)`` as a
    context, ``set_default_device``, a mode of its own): a finiteness check of ours entered from inside
    one must not reach the program's mode, nor, through it, the wrappers a program put on
    ``torch.Tensor``'s methods (a mode's ``func`` is ``torch.Tensor``'s attribute of that name)."""

    __slots__ = ()
    _function_guard = torch._C.DisableTorchFunction


_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._len_torch_function_stack
_PLAIN = (torch.Tensor, torch.nn.Parameter)


class _Loud:
    __slots__ = ()

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        pass


_LOUD = _Loud()


def quiet_from_modes(tensors):
    """``quiet()`` while a program's dispatch mode (``quiet_all()``: or torch-function mode) is on and every
    tensor read is a plain one, else no guard.

    A hook of ours that computes on tensors (a finiteness check: ``sum``, ``isfinite``, ``.item()``)
    runs inside the program's ``with Mode():`` when the program's backward does, and the mode would
    record those ops as the program's. Subclass tensors keep their dispatch (a wrapper subclass has
    no storage of its own to compute on), and with no mode on the guard costs nothing.
    """
    if (_dispatch_modes() or _function_modes()) and all(type(t) in _PLAIN for t in tensors if t is not None):
        return quiet_all() if _function_modes() else quiet()
    return _LOUD
