"""The Python API: ``tensorscope.inspect()`` records what a block of code does to its tensors.

It drives the same pipeline as ``tensorscope run`` (instrument.active -> snapshot ->
report.build -> diagnose.attach -> render); only where the names come from differs:
the scope of the ``with`` statement (or the decorated function's module) instead of a
program's ``__main__``.

NOTE [Nested blocks and threads]
The instrumentation is process-wide (it wraps ``torch.Tensor`` methods and, to
explain, pushes default saved-tensor hooks), so there is at most one recording at a time. An
``inspect()`` entered while one is running (a nested block, a decorated function
calling itself, a block on another thread, or a program under ``tensorscope run``)
joins it instead of starting a second one: it gets its own ``Report``, taken when
it exits, whose events are those recorded since it was entered; the outer report
sees the same events. The recording stops when the last block that joined it
exits. While it runs, tensor operations of every thread are recorded when they run
code from the first block's folder (as ``run`` records a program's threads); an
exception is diagnosed only by the block it leaves.

NOTE [No frame or tensor kept alive]
Names are read once, when the block exits, from the ``with`` statement's frame,
with ``peek_locals``, which leaves no snapshot of a running function's locals on
its frame (NOTE [Locals of a running frame] in instrument/frames.py), so a tensor
the caller drops after the block is freed at once. The report itself is plain data.
"""

from __future__ import annotations

import functools
import sys
import threading

from tensorscope.instrument.frames import peek_locals, strip_for_reraise

_CO_OPTIMIZED = 0x0001
_CO_SUSPENDS = 0x0020 | 0x0080 | 0x0200  # CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR
_lock = threading.Lock()
_shared = None  # the recording in progress that blocks join (see NOTE [Nested blocks and threads])


class Report:
    """What one :func:`inspect` block recorded: the JSON document of ``tensorscope run --json``.

    The parts are plain data (lists and dicts, tensors named by ids like ``t3`` and
    storages like ``s1``); the report is complete when the block exits.

    Example::

        >>> with tensorscope.inspect() as rep:
        ...     y = x.detach()
        >>> [t["names"] for t in rep.tensors]
        [['x'], ['y']]
    """

    def __init__(self, doc: dict | None = None):
        self._doc = doc

    @property
    def doc(self) -> dict:
        """The whole JSON document (see docs/CONTRACT.md)."""
        if self._doc is None:
            raise RuntimeError("the tensorscope report is complete only when the inspect() block exits")
        return self._doc

    @property
    def diagnosis(self) -> dict | None:
        """The explanation of the exception that left the block, or ``None``."""
        return self.doc["diagnosis"]

    @property
    def hazards(self) -> list:
        """Problems that raised nothing (e.g. a saved tensor changed through ``.data``)."""
        return self.doc["hazards"]

    @property
    def tensors(self) -> list:
        """Every tensor bound to a name when the block exited, and every temporary written through."""
        return self.doc["tensors"]

    @property
    def storages(self) -> list:
        """One entry per storage of a live tensor, with the ids of the tensors on it."""
        return self.doc["storages"]

    @property
    def events(self) -> list:
        """The timeline: creations, aliases, in-place writes, saves and backward calls, with file:line."""
        return self.doc["events"]

    @property
    def memory(self) -> dict | None:
        """The top holders of memory when the block exited (see docs/retention.md)."""
        return self.doc.get("memory")

    def holders(self, tensor) -> list[str]:
        """Who keeps ``tensor`` alive now: the reference paths from the caller's names to it, or to its
        storage, as text (``history -> [17] -> .grad_fn MmBackward0 -> saved `self```).

        Walks the caller's frames as they are at this call (not when the block exited), without a
        ``gc`` pass and without keeping anything alive. Example::

            >>> rep.holders(x)
            ['cache -> [\'k\']']
        """
        frame = sys._getframe(1)
        try:
            return holders(tensor, frame)
        finally:
            del frame

    def to_json(self, *, full: bool = False) -> str:
        """The report as ``tensorscope run --json`` prints it: the compact form, or with ``full=True``
        the full form (``--json --full``); ``Report.doc`` is always the full document."""
        from tensorscope.render import render

        return render(self.doc, "json", full=full)

    def render(self, *, width: int = 100, color: bool = False, full: bool = True) -> str:
        """The report as ``tensorscope run --full`` prints it in a terminal.

        With ``full=False`` only the header, the verdict, the diagnosis and the hazards (the
        tensor table, storage map and timeline are left out).
        """
        from tensorscope.render import render

        return render(self.doc if full else summary(self.doc), "text", width=width, color=color, full=full)

    def _repr_html_(self) -> str:
        return html(self.doc)

    def _repr_pretty_(self, p, cycle) -> None:  # a terminal IPython shows the whole report
        p.text(self.render() if self._doc is not None else repr(self))

    def __repr__(self) -> str:
        if self._doc is None:
            return "<tensorscope.Report (the block has not exited yet)>"
        d = self._doc["diagnosis"]
        return (f"<tensorscope.Report: {len(self._doc['tensors'])} tensors, {len(self._doc['events'])} events, "
                f"diagnosis {d['kind'] if d else None}, {len(self._doc['hazards'])} hazards>")


def holders(tensor, frame=None) -> list[str]:
    """The reference paths from the names of ``frame`` (the caller's, by default) and its callers to
    ``tensor`` or its storage, as text; ``[]`` when none is found within the walk's budget."""
    import torch

    from tensorscope.instrument import retention
    from tensorscope.instrument.frames import UserCode

    if frame is None:
        frame = sys._getframe(1)
    user = UserCode(frame.f_code.co_filename)
    try:
        with torch.no_grad():
            paths = retention.holders_of(tensor, frame, user)
    finally:
        del frame
    return [" -> ".join(s.get("label", "?") for s in p) for p in paths]


def html(doc: dict) -> str:
    """The HTML form of a report document (a notebook shows it)."""
    try:
        from tensorscope.render.html import render_html
    except ImportError:  # until the HTML renderer is there: the terminal text, escaped
        import html as html_

        from tensorscope.render import render

        return "<pre>" + html_.escape(render(doc, "text", width=100, color=False)) + "</pre>"
    return render_html(doc, fragment=True)  # one scoped <div>, to embed in a notebook's page


def summary(doc: dict) -> dict:
    """The document without its tensor table, storage map and timeline (what a short report shows)."""
    short = dict(doc, tensors=[], storages=[], version_counters=[], events=[])
    short["notes"] = list(doc["notes"]) + [
        f"{len(doc['tensors'])} tensors and {len(doc['events'])} events recorded (the full report shows them)"]
    return short


class inspect:
    """Record what the code inside a block does to its tensors, and explain an exception leaving it.

    A context manager and a decorator. Entering gives a :class:`Report`, filled in when the
    block exits. An exception leaving the block is diagnosed and re-raised unchanged (same
    object, message and traceback). Names are those of the ``with`` statement's scope (its
    locals and module globals) when the block exits; a decorated function's are its module
    globals and, on a failure, its locals at the failing line. Blocks may nest, recurse and
    run on several threads: see NOTE [Nested blocks and threads] in ``tensorscope/api.py``
    and the README.

    Args:
        explain: record as ``tensorscope explain`` does rather than ``run``: with the
            saved-tensor hooks that name the line whose node saved a tensor.
        device: ``"auto"`` (change nothing), ``"cpu"`` (CUDA placements go to the CPU) or
            ``"cuda"`` (CUDA is the default device), as ``--device``.
        ops: also record one event per aten op, as ``--ops`` (slower).

    Example::

        >>> with tensorscope.inspect() as rep:
        ...     z = (x * 2).sigmoid()
        ...     z.mul_(3)
        ...     z.sum().backward()
        Traceback (most recent call last):
        RuntimeError: one of the variables needed for gradient computation has been modified ...
        >>> rep.diagnosis["kind"]
        'inplace-modified-saved-tensor'

        >>> @tensorscope.inspect()
        ... def step(x):
        ...     return x.relu_()
        >>> step(torch.randn(3)); step.report.events[0]["kind"]
        'write'
    """

    def __init__(self, *, explain: bool = False, device: str = "auto", ops: bool = False):
        if device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', not {device!r}")
        self.options = ("explain" if explain else "run", device, bool(ops))
        self.report: Report | None = None  # the last report of a block that exited
        self._local = threading.local()

    def __enter__(self) -> Report:
        return self._enter(sys._getframe(1).f_code.co_filename)

    def __exit__(self, typ, exc, tb) -> bool:
        frame = sys._getframe(1)  # the frame of the `with` statement
        try:
            self._exit(exc, frame)
        finally:
            del frame
        return False  # never swallow: the exception goes on exactly as it came

    def __call__(self, func):
        code = getattr(func, "__code__", None)
        if code is not None and code.co_flags & _CO_SUSPENDS:
            raise TypeError("tensorscope.inspect() decorates plain functions: a generator or coroutine would "
                            "run after the block exits; use `with tensorscope.inspect():` inside it")
        filename = code.co_filename if code is not None else "<unknown>"
        scope = getattr(func, "__globals__", None)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            self._enter(filename)
            try:
                result = func(*args, **kwargs)
            except BaseException as e:
                self._exit(e, scope)
                wrapper.report = self.report
                strip_for_reraise(e)  # the traceback is the one the undecorated call gives
                raise
            self._exit(None, scope)
            wrapper.report = self.report
            return result

        wrapper.report = None
        return wrapper

    # --- one block ----------------------------------------------------------------------

    def _enter(self, filename: str) -> Report:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        report = Report()
        block = _join(filename, self.options, getattr(self, "_root", None))
        stack.append((block, report))
        return report

    def _exit(self, exc, where) -> None:
        block, report = self._local.stack.pop()
        try:
            report._doc = _finish(block, exc, where)
        except Exception as e:  # tensorscope never breaks the caller's code: a bare report instead
            report._doc = _bare_doc(block, exc, f"internal error in tensorscope: {type(e).__name__}: {e}")
        self.report = report


class recording(inspect):
    """``inspect()`` for code tensorscope runs itself (a pytest test, an IPython cell).

    ``filename`` decides which files are the user's code (the files below its folder, or
    below ``root`` when given: a pytest rootdir, so a project's own modules count) and
    ``scope`` is the namespace whose names the report uses (a dict, or a function giving
    it when the block exits);
    the exception, if any, is handed to ``__exit__`` (it never passes through this
    object's frames).
    """

    def __init__(self, filename: str, scope: dict | None, *, root: str | None = None, **options):
        super().__init__(**options)
        self._filename = filename
        self._scope = scope
        self._root = root

    def __enter__(self) -> Report:
        return self._enter(self._filename)

    def __exit__(self, typ, exc, tb) -> bool:
        self._exit(exc, self._scope)
        return False


class _Recording:
    """The one recording in progress and how many blocks have joined it."""

    def __init__(self, tracker, options, stack=None, control=None):
        self.tracker = tracker
        self.options = options
        self.stack = stack  # ExitStack of instrument.active(); None when joined from `tensorscope run`
        self.control = control
        self.blocks = 0


class _Block:
    def __init__(self, recording, since, options, filename):
        self.recording = recording
        self.since = since  # tracker.seq when the block was entered
        self.options = options
        self.filename = filename


def _join(filename: str, options, root: str | None = None) -> _Block:
    global _shared
    # under `tensorscope run` of a program that has not imported torch yet, this import installs the
    # command line's instrumentation (NOTE [Instrumenting at the program's import of torch] in
    # tensorscope/torch_import.py), which the block then joins
    import torch  # noqa: F401

    with _lock:
        rec = _shared
        if rec is None:
            rec = _cli_recording(options) or _start(filename, options, root)
            _shared = rec
        elif rec.options[1] != options[1] and rec.stack is not None:
            # the code would silently run on another device than the one it asked for
            raise RuntimeError(
                f"tensorscope.inspect(device={options[1]!r}) inside a block recording with "
                f"device={rec.options[1]!r}: nested blocks share one recording, so their devices must match")
        rec.blocks += 1
        return _Block(rec, rec.tracker.seq, options, filename)


def _cli_recording(options):
    """The recording of ``tensorscope run``/``explain`` when the program itself calls inspect()."""
    from tensorscope.instrument import state

    tracker = state.recorder
    if tracker is None or not tracker.active:
        return None
    return _Recording(tracker, options)


def _start(filename: str, options, root: str | None = None) -> _Recording:
    import contextlib

    from tensorscope.instrument import session as instrument

    _, device, ops = options
    if device == "cuda":
        from tensorscope.instrument.device import cuda_unavailable_reason

        reason = cuda_unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason.replace("--device cuda", "tensorscope.inspect(device='cuda')"))
    # the user's code: the files below the block's folder, or below `root` (a pytest rootdir) when given
    tracker = instrument.new_tracker(_below(root, filename) if root else filename)
    stack = contextlib.ExitStack()
    # saved-tensor hooks for explain only, as the command line does (NOTE [Hooks only under explain])
    control = stack.enter_context(instrument.active(tracker, device=device, ops=ops,
                                                    hooks=options[0] == "explain"))
    return _Recording(tracker, options, stack, control)


def _below(root: str, filename: str) -> str:
    """A path in ``root`` standing for ``filename`` when ``filename`` lies below it (else ``filename``)."""
    import os

    root = os.path.realpath(root)
    if not os.path.realpath(filename).startswith(root.rstrip(os.sep) + os.sep):
        return filename
    return os.path.join(root, os.path.basename(filename))


def _leave(block: _Block) -> bool:
    """Count the block out; True when it was the last one (the recording is to stop)."""
    global _shared
    with _lock:
        rec = block.recording
        rec.blocks -= 1
        last = rec.blocks == 0
        if last:
            _shared = None
    return last


def _finish(block: _Block, exc, where) -> dict:
    rec = block.recording
    last = _leave(block)
    try:
        if last and rec.control is not None:
            rec.control.stop()
        scope = _scope(where)
        doc = _build(block, exc, scope)
    finally:
        scope = None  # see NOTE [No frame or tensor kept alive]
        if last and rec.stack is not None:
            rec.stack.close()
    return doc


def _scope(where):
    """The names visible where the block ran (a new dict: globals, then the frame's locals)."""
    if callable(where):  # a namespace read when the block exits (an IPython cell's user_ns)
        where = where()
    if where is None or isinstance(where, dict):
        return where
    local_ns = peek_locals(where) if where.f_code.co_flags & _CO_OPTIMIZED else where.f_locals
    return {**where.f_globals, **local_ns}


def _build(block: _Block, exc, scope) -> dict:
    import torch

    from tensorscope import report
    from tensorscope import diagnose
    from tensorscope.compact import expand
    from tensorscope.instrument import session as instrument
    from tensorscope.session import exception_info

    tracker = block.recording.tracker
    command, device, ops = block.recording.options  # what was recorded, whatever a joined block asked for
    snap = instrument.snapshot(tracker, scope, exc)
    status = 0 if exc is None else 1
    path = report.display_path(block.filename) or "<unknown>"
    program = {"path": path, "argv": [], "exit_status": status, "exception": exception_info(exc, tracker.user)}
    recording = instrument.record(tracker, snap)  # nothing below this line sees the tracker
    doc = report.build(recording, command=command, program=program,
                       torch_version=torch.__version__, device_mode=device)
    diagnose.attach(doc, recording)
    doc = expand(doc)  # Report.doc is the full document (NOTE [The document's tensors as rows])
    if block.since:
        _keep_events_since(doc, block.since)
    if block.options != block.recording.options:
        doc["notes"].append(f"this block asked for explain={block.options[0] == 'explain'}, ops={block.options[2]} "
                            f"and joined a recording with explain={command == 'explain'}, ops={ops}")
    return doc


def _keep_events_since(doc: dict, seq: int) -> None:
    """A joined block's report: only the events recorded after it was entered."""
    doc["events"] = [e for e in doc["events"] if e.get("seq", 0) > seq]
    doc["events_summary"]["recorded"] = len(doc["events"])
    doc["notes"].append("this block joined a recording already in progress: its events are those "
                        "recorded since it was entered")


def _bare_doc(block: _Block, exc, note: str) -> dict:
    """The report of a block whose report could not be built (see NOTE [One document skeleton])."""
    from tensorscope import report

    command, device, _ = block.options
    exception = None if exc is None else {"type": type(exc).__name__, "message": str(exc), "file": None,
                                          "line": None}
    program = {"path": "<unknown>", "argv": [], "exit_status": 0 if exc is None else 1, "exception": exception}
    return report.skeleton(command=command, program=program, torch_version=None, device_mode=device, notes=[note])
