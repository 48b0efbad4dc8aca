"""Entry points recorded for the provenance of a missing graph (the no-grad-fn diagnosis).

``Distribution.sample()`` draws without a path back to the distribution's parameters
(``rsample()`` keeps one): each ``sample``/``rsample`` that a ``torch.distributions`` class
defines itself is wrapped, and a call made from the program's own code is recorded as a
``sample`` event. Like every wrapper (see NOTE [Hot path] in patches.py) this costs one
frame check per call; nothing is walked until a backward fails.
"""

from __future__ import annotations

import torch

from tensorscope.instrument.calls import after_call
from tensorscope.instrument.recorder import inspectable

_Tensor = torch.Tensor


def make_sample(op, orig):
    def after(rec, args, kwargs, out, frame):
        if frame.f_code.co_filename in rec.user:
            rec.on_sample(op, args[0], out, frame)

    return after_call(orig, after)


# Ops whose result has no grad_fn by nature (integer or bool values): a graph ends there. Each is
# recorded as a `copy` event (op, source, source_requires_grad) when the program's own code calls it
# on a tensor that requires grad, so the no-grad-fn diagnosis reads the cut from what ran.
INTEGER_METHODS = ("argmax", "argmin", "argsort", "long", "int", "short", "byte", "bool")
# The operators (`a > b`, `Tensor.__gt__`) are not wrapped: a wrapper cannot give inspect.getdoc the
# text it finds for the original through `object.__gt__` (tests/programs/introspect_wrappers.py), so
# a comparison written as an operator is still found from the source.
COMPARISON_OPS = ("lt", "le", "gt", "ge", "eq", "ne", "less", "greater", "less_equal", "greater_equal", "not_equal")
TORCH_FUNCTIONS = ("argmax", "argmin", "argsort") + COMPARISON_OPS


def make_cut(op, orig):
    def after(rec, args, kwargs, out, frame):
        try:
            src = next((a for a in args[:2] if isinstance(a, _Tensor) and a.requires_grad), None)
            if src is not None and isinstance(out, _Tensor) and out is not src:
                if frame.f_code.co_filename in rec.user and inspectable(src):
                    rec.on_copy(op, src, out, frame, "copy", kwargs)
        except Exception:
            pass

    return after_call(orig, after)


def install_cuts(set_attr) -> None:
    """Wrap the ops that end a graph by nature (see INTEGER_METHODS) on Tensor and in torch."""
    import torch

    t = torch.Tensor
    for name in INTEGER_METHODS + COMPARISON_OPS:
        orig = getattr(t, name, None)
        if callable(orig):
            set_attr(t, name, make_cut(name, orig))
    for name in TORCH_FUNCTIONS:
        orig = getattr(torch, name, None)
        if callable(orig):
            set_attr(torch, name, make_cut(name, orig))


def distribution_classes() -> list:
    """The classes of ``torch.distributions`` (and their bases) in a stable order."""
    import torch.distributions as dists

    base = dists.Distribution
    found = {}
    for name in sorted(dir(dists)):
        cls = getattr(dists, name, None)
        if isinstance(cls, type) and issubclass(cls, base):
            for c in cls.__mro__:
                if isinstance(c, type) and issubclass(c, base):
                    found.setdefault(f"{c.__module__}.{c.__qualname__}", c)
    return [found[k] for k in sorted(found)]


def install(set_attr) -> None:
    """Wrap, through the patcher's ``set_attr(owner, name, value)``, every own ``sample``/``rsample``."""
    for cls in distribution_classes():
        for op in ("sample", "rsample"):
            orig = vars(cls).get(op)
            if callable(orig) and not isinstance(orig, (staticmethod, classmethod)):
                set_attr(cls, op, make_sample(op, orig))
