"""Entry points recorded for the provenance of a missing graph (the no-grad-fn diagnosis).

``Distribution.sample()`` draws without a path back to the distribution's parameters
(``rsample()`` keeps one): each ``sample``/``rsample`` that a ``torch.distributions`` class
defines itself is wrapped, and a call made from the program's own code is recorded as a
``sample`` event. Like every wrapper (see NOTE [Hot path] in patches.py) this costs one
frame check per call; nothing is walked until a backward fails.
"""

from __future__ import annotations

import sys

from tensorscope.instrument import state
from tensorscope.instrument.transparent import named


def make_sample(op, orig):
    def sample(self, *args, **kwargs):
        rec = state.recorder
        if rec is None or not rec.active:
            return orig(self, *args, **kwargs)
        try:
            out = orig(self, *args, **kwargs)
        except BaseException as e:
            from tensorscope.instrument.patches import strip_traceback

            strip_traceback(e)
            raise
        frame = sys._getframe(1)
        if frame.f_code.co_filename in rec.user:
            rec.on_sample(op, self, out, frame)
        return out

    return named(sample, orig)


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
