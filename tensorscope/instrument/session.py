"""Switching the instrumentation on around one program run, and off again."""

from __future__ import annotations

from contextlib import contextmanager

from tensorscope.instrument import ddp, saved, snapshot as _snapshot, state, watch
from tensorscope.instrument.patches import Patcher
from tensorscope.instrument.tracker import Tracker, make_tracker
from torch.utils._device import _device_constructors  # device: see active()


def new_tracker(program_path: str | None) -> Tracker:
    """A tracker for one run (the program's own files: every file outside the installation, see UserCode)."""
    return make_tracker(program_path)


class _Control:
    def __init__(self, tracker: Tracker, patcher: Patcher):
        self.tracker = tracker
        self.patcher = patcher
        self.stopped = False
        self.ops = None

    def stop(self) -> None:
        """Stop recording (the program has finished); hooks of live graphs keep working."""
        if self.stopped:
            return
        self.stopped = True
        self.tracker.active = False
        if self.ops is not None:
            self.ops.__exit__(None, None, None)
        if saved.hooks_on_top():
            saved.pop()
        self.patcher.uninstall()
        watch.reset()


@contextmanager
def active(tracker: Tracker, device: str = "auto", ops: bool = False, hooks: bool = False):
    """Install the wrappers (and, for ``explain``, the saved-tensor hooks) for the duration of a run.

    See NOTE [Hooks only under explain] in saved.py.
    """
    patcher = Patcher()
    state.recorder = tracker
    # --- device (tensorscope/instrument/device.py): torch caches its list of factories that honour
    # `with torch.device(...)` / set_default_device on first use; fill it before the wrappers go in,
    # or it holds the wrappers and those contexts silently stop working during the run.
    _device_constructors()
    # --- end device
    patcher.install()
    ddp.install(tracker, patcher)
    if hooks:
        tracker.check_values = True  # see NOTE [Fingerprints of saved tensors]
        saved.push()
    control = _Control(tracker, patcher)
    if device != "auto":
        from tensorscope.instrument import device as _device

        _device.install(device, tracker, patcher)
    if ops:
        from tensorscope.instrument import ops as _ops

        control.ops = _ops.install(tracker).__enter__()
        tracker.note("--ops: one event per aten op called from the program's lines (capped per line)")
    tracker.active = True
    try:
        yield control
    finally:
        control.stop()


def resolve_silent(tracker: Tracker) -> None:
    """Turn the CUDA unpack checks into hazards, once the program has finished.

    The one place tensorscope reads a value: one flag per unpack check on CUDA (did the saved
    bytes' checksum change?), read after the program, so no synchronisation happens while it runs.
    See NOTE [Fingerprints of saved tensors] in saved.py.
    """
    tracker.resolve_unchecked()


def snapshot(tracker: Tracker, main_globals, exc) -> dict:
    active_before = tracker.active
    tracker.active = False
    resolve_silent(tracker)
    try:
        return _snapshot.take(tracker, main_globals, exc)
    finally:
        tracker.active = active_before


def distributed_info(tracker, env: dict | None) -> dict | None:
    """``distributed`` of the report: torchrun's rank, local rank and world size, and the backend."""
    if env is None:
        return None
    return {**env, "backend": ddp.backend_now(tracker)}
