"""The shape shared by the wrappers that record after a call returns (aliases, copies, creations,
``state_dict()``, graph cuts, distribution draws): call the original as the program asked, then record.

See NOTE [Hot path] and NOTE [Invisible frames] in patches.py.
"""

from __future__ import annotations

import threading

import sys

from tensorscope.instrument import state
from tensorscope.instrument.frames import strip_for_reraise
from tensorscope.instrument.transparent import named

_get_ident = threading.get_ident
_PAUSED = state.PAUSED  # see NOTE [Pausing the recorder] in tracker.py


def target(args, kwargs):
    """The tensor a call acts on: its first argument, or ``input=``/``self=``."""
    if args:
        return args[0]
    return kwargs.get("input", kwargs.get("self"))


def after_call(orig, after, *, op=None, where=None):
    """A wrapper dressed as ``orig`` (``transparent.named``) that, while a run records, calls ``orig``
    and then ``after(rec, args, kwargs, out, frame)``, ``frame`` being the caller's.

    An exception from ``orig`` passes through with tensorscope's frames taken out of its traceback;
    with ``where`` (the event kind, ``"alias"``) it is first recorded as the failure of ``op``
    (``Tracker.on_error``).

    Example::

        make = lambda orig: after_call(orig, lambda rec, args, kwargs, out, frame: ..., op="view", where="alias")
    """
    def call(*args, **kwargs):
        rec = state.recorder
        if rec is None or not rec.active or _PAUSED and _get_ident() in _PAUSED:
            try:  # NOTE [Invisible frames] in patches.py
                return orig(*args, **kwargs)
            except BaseException as e:
                strip_for_reraise(e)
                raise
        try:
            out = orig(*args, **kwargs)
        except BaseException as e:
            if where is not None:
                rec.on_error(e, op, target(args, kwargs), sys._getframe(1), where)
            strip_for_reraise(e)
            raise
        after(rec, args, kwargs, out, sys._getframe(1))
        return out

    return named(call, orig)
