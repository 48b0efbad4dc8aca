"""``--device cpu|cuda``: where the program's tensors live, for the duration of one run.

Only installed when ``--device`` is not ``auto``: the default mode adds nothing
here (see NOTE [Hot path] in ``patches.py``).

``cpu``  Runs a program written for CUDA on a machine without a GPU. A
         ``TorchFunctionMode`` rewrites CUDA placements to the CPU: ``device=``
         arguments of factories and tensor methods (``torch.zeros(..., device="cuda")``,
         ``torch.tensor(..., device=dev)``, ``x.new_tensor(..., device=...)``,
         ``x.to("cuda")``, ``x.to(device=...)``, ``x.to(0)``), ``x.cuda()`` (and so
         ``nn.Module.cuda()``/``.to("cuda")``), ``x.type("torch.cuda.FloatTensor")``,
         factories under ``with torch.device("cuda")`` / ``torch.set_default_device("cuda")``,
         and ``torch.load(map_location="cuda")``. The program then behaves like the
         same program with "cuda" replaced by "cpu": in particular ``x.to("cuda")``
         and ``x.cuda()`` of a tensor already on the CPU return that tensor itself,
         where a GPU would copy it to new storage (the report says how many did).
         Checks such as ``torch.cuda.is_available()`` are left as they are. CUDA
         utilities that would raise "Torch not compiled with CUDA enabled" but have
         nothing to do on the CPU (``torch.cuda.synchronize``, ``empty_cache``,
         ``manual_seed``, ...) become no-ops, and the report says which ran.
``cuda`` Makes CUDA the default device for tensors created without a device, as
         ``torch.set_default_device("cuda")`` does, for the duration of the run.
         The command line refuses this mode up front when no GPU is usable
         (:func:`cuda_unavailable_reason`).

Both modes are torch-function modes, pushed for the run and popped when the
patcher uninstalls (an entry in its undo list, see :class:`_OnUndo`), so the
program's own modes, ``with torch.device(...)`` and ``set_default_device``
keep working. A mode only covers the thread that runs the program (the torch
function mode stack is thread-local); tensors placed by the program's own
threads are not rewritten.

NOTE [Nested wrappers]
With any torch-function mode active, a Tensor method or property reaches the
mode with ``func`` looked up on ``torch.Tensor`` again, i.e. tensorscope's own
wrapper from ``patches.py``. Calling it a second time from the mode would
record every write, ``x.data = y`` and ``requires_grad`` change twice (this is
what ``torch.set_default_device`` alone does under tensorscope). Our modes call
the original underneath instead (:func:`_unwrap`).

NOTE [No synchronisation]
Nothing here reads tensor values: only types, ``device`` arguments and object
identity. (``tests/test_device.py`` checks that tensorscope adds no ``item``,
``tolist``, ``cpu``, ``bool`` or ``torch.cuda.synchronize`` call to a run.)
"""

from __future__ import annotations

import sys

import torch
import torch.utils._device as _torch_device
from torch.overrides import TorchFunctionMode

from tensorscope.instrument.transparent import original

_CPU = torch.device("cpu")
_Tensor = torch.Tensor
_TensorBase = torch._C.TensorBase
_base_cpu = _TensorBase.cpu


# CUDA utilities that raise on a build (or machine) without CUDA and mean nothing on the CPU.
# (manual_seed*, seed*, empty_cache already do nothing on a CPU build; replacing them makes that explicit
# and lets the report say so. Only calls made by the program itself are counted: torch.manual_seed
# calls torch.cuda.manual_seed_all.)
_NOOP_UTILITIES = ("synchronize", "empty_cache", "ipc_collect", "manual_seed", "manual_seed_all", "seed",
                   "seed_all", "set_device", "reset_peak_memory_stats", "reset_max_memory_allocated",
                   "reset_max_memory_cached", "reset_accumulated_memory_stats")


def cuda_unavailable_reason() -> str | None:
    """Why ``--device cuda`` cannot run here (one line), or None when a CUDA GPU is usable."""
    try:
        if torch.cuda.is_available():
            return None
    except Exception:  # a broken driver: is_available() itself may raise
        pass
    if torch.version.cuda is None:
        why = f"torch {torch.__version__} was built without CUDA"
    else:
        why = "no CUDA GPU is available"
    return f"--device cuda: {why}; use --device cpu to run a CUDA program on the CPU"


def _unwrap(func):
    """The original op under one of tensorscope's wrappers (see NOTE [Nested wrappers])."""
    return original(func)


def _note_properties() -> None:
    """Nothing to note: ``patches.original`` knows tensorscope's properties by their type."""


def _is_cuda(dev) -> bool:
    """True for a CUDA placement: "cuda", "cuda:1", torch.device("cuda", 0), or a bare device index."""
    if isinstance(dev, str):
        return dev.startswith("cuda")
    if isinstance(dev, torch.device):
        return dev.type == "cuda"
    return type(dev) is int  # an index means the current accelerator (bool is not int here)


def _cuda_type_name(t):
    """``"torch.cuda.FloatTensor"`` -> ``"torch.FloatTensor"``; None when not a CUDA tensor type."""
    if isinstance(t, str):
        return "torch." + t[len("torch.cuda."):] if t.startswith("torch.cuda.") else None
    if isinstance(t, type) and getattr(t, "__module__", None) == "torch.cuda":
        return "torch." + t.__name__
    return None


class _CpuPlacement(TorchFunctionMode):
    """Rewrites CUDA placements to the CPU (``--device cpu``)."""

    def __init__(self):
        super().__init__()
        self.count = 0  # calls whose placement was rewritten
        self.same = 0  # moves that returned their input (a GPU would have copied)

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        func = _unwrap(func)
        rewritten = False
        if kwargs:
            dev = kwargs.get("device")
            if dev is not None and _is_cuda(dev):
                kwargs = dict(kwargs)
                kwargs["device"] = _CPU
                rewritten = True
        else:
            kwargs = {}
        name = getattr(func, "__name__", None)
        if name == "cuda" and args and isinstance(args[0], _Tensor):
            self.count += 1
            mf = kwargs.get("memory_format")
            out = _base_cpu(args[0]) if mf is None else _base_cpu(args[0], memory_format=mf)
            if out is args[0]:
                self.same += 1
            return out
        if name == "to" and len(args) > 1 and isinstance(args[0], _Tensor) and _is_cuda(args[1]):
            args = (args[0], _CPU, *args[2:])
            rewritten = True
        elif name == "type" and len(args) > 1 and isinstance(args[0], _Tensor):
            cpu_name = _cuda_type_name(args[1])
            if cpu_name is not None:
                args = (args[0], cpu_name, *args[2:])
                rewritten = True
        elif not rewritten and kwargs.get("device") is None:
            # with torch.device("cuda") / set_default_device("cuda") in the program
            current = _torch_device.CURRENT_DEVICE
            if current is not None and current.type == "cuda" and func in _constructors():
                kwargs["device"] = _CPU
                rewritten = True
        if not rewritten:
            return func(*args, **kwargs)
        self.count += 1
        out = func(*args, **kwargs)
        if name == "to" and out is args[0]:
            self.same += 1
        return out


def _device_module():
    return _torch_device


_constructor_set: frozenset | None = None


def _constructors() -> frozenset:
    """The factories that honour a default device (torch's own list), as the original functions.

    ``torch.utils._device._device_constructors()`` caches ``torch.zeros`` etc. as
    found on first use: tensorscope's wrappers when that happens during a run.
    """
    global _constructor_set
    if _constructor_set is None:
        _constructor_set = frozenset(_unwrap(f) for f in _device_module()._device_constructors())
    return _constructor_set


class _OnUndo:
    """An entry in the Patcher's undo list that runs a callback when it is taken out.

    ``Patcher._set(_OnUndo(fn), "installed", True)`` records that the attribute
    did not exist, so ``Patcher.uninstall`` deletes it, which runs ``fn``.
    """

    def __init__(self, fn):
        self.__dict__["_fn"] = fn

    def __delattr__(self, name):
        object.__delattr__(self, name)
        fn = self.__dict__.pop("_fn", None)
        if fn is not None:
            try:
                fn()
            except Exception:
                pass


def _push(mode) -> None:
    from torch.overrides import _push_mode

    _push_mode(mode)


def _remove(mode) -> None:
    """Take `mode` off this thread's torch-function mode stack, wherever it is; keep the others in order."""
    from torch.overrides import _pop_mode, _push_mode

    stack = [_pop_mode() for _ in range(torch._C._len_torch_function_stack())]  # top first
    for m in reversed(stack):
        if m is not mode:
            _push_mode(m)


def install(mode: str, tracker, patcher) -> None:
    """Install ``--device`` MODE ("cpu" or "cuda") for one run; the patcher undoes it."""
    _note_properties()
    if mode == "cpu":
        _install_cpu(tracker, patcher)
    elif mode == "cuda":
        _install_cuda(tracker, patcher)
    else:
        raise ValueError(f"unknown device mode {mode!r}")


def _install_cpu(tracker, patcher) -> None:
    placement = _CpuPlacement()
    used: dict[str, int] = {}
    if not torch.cuda.is_available():
        for name in _NOOP_UTILITIES:
            if getattr(torch.cuda, name, None) is not None:
                patcher._set(torch.cuda, name, _noop(name, used, tracker.user))
    orig_load = torch.load

    def load(f, map_location=None, *args, **kwargs):
        if map_location is None or _is_cuda(map_location):
            if map_location is not None:
                placement.count += 1
            map_location = _CPU
        return orig_load(f, map_location, *args, **kwargs)

    load.__wrapped__ = orig_load
    load.__doc__ = orig_load.__doc__
    patcher._set(torch, "load", load)

    def done():
        _remove(placement)
        tracker.notes.insert(0, f"--device cpu: CUDA placements mapped to the CPU ({placement.count} "
                                f"call{'s' if placement.count != 1 else ''})")
        if placement.same:
            tracker.note(f"--device cpu: {placement.same} of them (.to('cuda') or .cuda() of a tensor already "
                         "on the CPU) returned the tensor itself; on a GPU each would copy to new storage")
        if used:
            calls = ", ".join(f"torch.cuda.{n} ({k})" for n, k in used.items())
            tracker.note(f"--device cpu: CUDA utilities ran as no-ops on the CPU: {calls}")

    _push(placement)
    patcher._set(_OnUndo(done), "installed", True)


def _noop(name, used, user):
    def noop(*args, **kwargs):
        if sys._getframe(1).f_code.co_filename in user:
            used[name] = used.get(name, 0) + 1
        return None

    noop.__name__ = noop.__qualname__ = name
    noop.__doc__ = f"tensorscope --device cpu: torch.cuda.{name} does nothing on the CPU."
    return noop


class _CudaDefault(_device_module().DeviceContext):
    """``torch.set_default_device("cuda")``'s mode, calling originals under tensorscope's wrappers."""

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        func = _unwrap(func)
        kwargs = kwargs or {}
        if kwargs.get("device") is None and func in _constructors():
            kwargs["device"] = self.device
        return func(*args, **kwargs)


def _install_cuda(tracker, patcher) -> None:
    reason = cuda_unavailable_reason()
    if reason is not None:
        raise RuntimeError(reason)
    g = getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None)
    if g is None:  # an older or newer torch: the public call (writes may then be recorded twice)
        before = torch.get_default_device()
        torch.set_default_device("cuda")

        def done_public():
            torch.set_default_device(None if before.type == "cpu" else before)

        patcher._set(_OnUndo(done_public), "installed", True)
        tracker.notes.insert(0, "--device cuda: tensors created without a device are put on CUDA")
        return
    previous = getattr(g, "device_context", None)
    ours = _CudaDefault("cuda")

    def switch(ctx):
        current = getattr(g, "device_context", None)
        if current is not None:
            current.__exit__(None, None, None)
        if ctx is not None:
            ctx.__enter__()
        g.device_context = ctx

    switch(ours)
    patcher._set(_OnUndo(lambda: switch(previous)), "installed", True)
    tracker.notes.insert(0, f"--device cuda: tensors created without a device are put on {torch.get_default_device()} "
                            "(torch.set_default_device); from_numpy/frombuffer results stay on the CPU")
