"""torch.distributed: the backend of the run and the parameter names of each DistributedDataParallel.

DDP's reducer reports parameters that got no gradient by index ("Parameter indices which did
not receive grad for rank 0: 2 3"). The index is a position in the list DDP builds when it is
constructed; a wrapper around ``DistributedDataParallel.__init__`` records that list as names
(plain strings), so the explanation can name the parameters by module path. The wrapper runs once
per construction and keeps no tensor.
"""

from __future__ import annotations

import functools

from tensorscope.instrument.frames import user_frame


def install(tracker, patcher) -> None:
    """Wrap DDP construction and ``init_process_group`` for one run (the patcher undoes it)."""
    try:
        import torch.distributed as dist

        if not dist.is_available():
            return
        from torch.nn.parallel import distributed as ddp_module
    except Exception:  # a build without distributed support: nothing to record
        return
    DDP = ddp_module.DistributedDataParallel
    orig_init = DDP.__init__

    @functools.wraps(orig_init)
    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        try:
            _record_model(tracker, self, dist)
        except Exception:  # never disturb the program's construction
            pass

    patcher._set(DDP, "__init__", __init__)
    orig_init_pg = dist.init_process_group

    @functools.wraps(orig_init_pg)
    def init_process_group(*args, **kwargs):
        result = orig_init_pg(*args, **kwargs)
        try:
            tracker.distributed_backend = str(dist.get_backend())
        except Exception:
            pass
        return result

    patcher._set(dist, "init_process_group", init_process_group)


def reducer_parameter_names(module, ignore=()) -> list[str]:
    """The names of the parameters DDP reduces, in the reducer's index order.

    DDP walks ``named_modules()`` and each module's own parameters, keeps those that require
    grad and are not ignored, and drops repeats of one parameter object (weight tying).
    """
    names: list[str] = []
    seen: set[int] = set()
    for module_name, m in module.named_modules():
        for param_name, p in m.named_parameters(recurse=False):
            full = f"{module_name}.{param_name}" if module_name else param_name
            if not p.requires_grad or f"{module_name}.{param_name}" in ignore or full in ignore:
                continue
            if id(p) in seen:
                continue
            seen.add(id(p))
            names.append(full)
    return names


def _record_model(tracker, ddp, dist) -> None:
    import sys

    frame = user_frame(sys._getframe(2), tracker.user)
    forwards = {}  # module path -> where its forward is defined, for the program's own modules
    for path, m in ddp.module.named_modules():
        code = getattr(getattr(type(m), "forward", None), "__code__", None)
        if code is not None and code.co_filename in tracker.user:
            forwards[path] = {"file": code.co_filename, "line": code.co_firstlineno,
                              "function": f"{type(m).__qualname__}.forward"}
    record = {
        "parameters": reducer_parameter_names(ddp.module, getattr(ddp, "parameters_to_ignore", ())),
        "forwards": forwards,
        "file": frame.f_code.co_filename if frame is not None else None,
        "line": frame.f_lineno if frame is not None else None,
        "find_unused_parameters": bool(getattr(ddp, "find_unused_parameters", False)),
    }
    tracker.ddp_models.append(record)
    try:
        tracker.distributed_backend = str(dist.get_backend(ddp.process_group))
    except Exception:
        pass


def backend_now(tracker) -> str | None:
    """The process group's backend: now if it is still initialised, else the one recorded during the run."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return str(dist.get_backend())
    except Exception:
        pass
    return tracker.distributed_backend
