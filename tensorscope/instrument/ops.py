"""`--ops`: the opt-in deeper mode, one event per aten op the program runs (its cost is in the benchmark).

The default mode wraps only the entry points that alias, write or run backward (see NOTE [Hot
path] in patches.py). This mode adds a TorchDispatchMode that sees every aten op, backward ops
included, and records, per op call from the program's own code: the aten name, the ids of its
tensor inputs and outputs, and which inputs it wrote (from the op's schema). Events are capped
per source line like every other kind, so the log stays bounded.
"""

from __future__ import annotations

import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _pop_mode, _push_mode

from tensorscope.instrument.frames import user_frame
from tensorscope.instrument.recorder import inspectable

_Tensor = torch.Tensor
_DISPATCH_SHIMS = ("eval_frame.py", "_compile.py")


class OpRecorder(TorchDispatchMode):
    """Records aten ops (see module docstring)."""

    def __init__(self, tracker):
        super().__init__()
        self.tracker = tracker

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        tr = self.tracker
        if not tr.active:
            return out
        try:
            f = sys._getframe(1)
            while f is not None and f.f_code.co_filename.endswith(_DISPATCH_SHIMS):
                f = f.f_back  # torch wraps __torch_dispatch__ in dynamo's disable(): not compiling
            uf = user_frame(f, tr.user)
            if uf is None and tr.backward_calls.current is None:
                return out
            if uf is not None and not tr.allow("op", uf):
                return out
            inputs = [a for a in _flat(args) + _flat(list(kwargs.values())) if isinstance(a, _Tensor) and inspectable(a)]
            outputs = [o for o in _flat([out]) if isinstance(o, _Tensor) and inspectable(o)]
            written = []
            for i, arg in enumerate(func._schema.arguments):
                if arg.alias_info is not None and arg.alias_info.is_write:
                    value = kwargs.get(arg.name) if arg.kwarg_only else (args[i] if i < len(args) else kwargs.get(arg.name))
                    for t in _flat([value]):
                        if isinstance(t, _Tensor) and inspectable(t):
                            written.append(tr.tid(t))
            data = {"op": str(func.overloadpacket.__name__), "aten": str(func), "inputs": [tr.tid(t) for t in inputs],
                    "outputs": [tr.tid(t) for t in outputs], "written": written}
            if uf is None:  # backward ops on the engine's threads: the user's backward() line
                b = tr.backward_calls.current
                data["during_backward"] = True
                tr.seq += 1
                tr.events.append(dict({"seq": tr.seq, "kind": "op", "file": b["file"], "line": b["line"]}, **data))
            else:
                tr.emit("op", uf, **data)
        except Exception:
            pass
        return out


def _flat(values):
    out = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(_flat(v))
        else:
            out.append(v)
    return out


class _Installed:
    def __init__(self, tracker):
        self.mode = OpRecorder(tracker)

    def __enter__(self):
        # pushed directly: TorchDispatchMode.__enter__ is wrapped to step our saved-tensor hooks
        # aside for the *program's* modes, not for this one
        _push_mode(self.mode)
        return self

    def __exit__(self, *exc):
        _pop_mode()


def install(tracker):
    return _Installed(tracker)
