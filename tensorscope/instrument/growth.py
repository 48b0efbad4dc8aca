"""Growth across iterations: live bytes per name, sampled at step boundaries (backward calls, or the
top-level module calls of a program that makes no backward call).

NOTE [Sampling growth]
A step boundary is a backward() or autograd.grad call that returned, on the program's main thread.
At boundaries 2 to 6 and then at 8, 16, 32, ... (``due``), a retention walk (see NOTE [Retention
walks]) from the frames of the backward call measures the bytes and graph nodes each of the
program's names holds, and which storages. A name grows when its bytes (or, for a graph kept alive,
its graph nodes) went up at each of its last three samples, with new storages each time; then the
finding names it, the path to the largest storage new at the last sample, that storage's allocating
line, and the bytes per step (backward call) between those samples. Memory that is flat (a list of
``.item()`` floats, detached values, a removed hook, a bounded cache full before the last samples)
does not grow at its last samples. The walk costs one pass over what the program holds, at about a
dozen boundaries of a long run (see benchmarks/RESULTS.md).

NOTE [Growth inside a short loop]
An accumulator reset at the top of each epoch (``total_loss = 0`` in ``train()``, then
``total_loss += loss``) keeps one epoch's graphs, which a power-of-two schedule never sees grow: at
step 2^k its size is 2^k mod the epoch's length, the same phase at every sample of a long run. So each
sample at a power of two opens a *window* of consecutive boundaries: the next boundary is sampled too,
and the window goes on (to at most ``_WINDOW`` samples) while the last sample saw some name's bytes or
graph nodes change, until one name rose at three consecutive boundaries. A loop of three or more steps
per epoch then rises at three consecutive boundaries inside one window whatever its phase (a reset
shows as a change, so the window goes on past it). A name that grew at three consecutive boundaries of
a window is reported even when it is smaller at the last samples (its loop reset it): its graph was
kept across backward calls, which is what the finding is about. Such an earlier window counts only
for graph nodes: bytes that rose and then stopped (a bounded cache filled early) are what the last
samples are for. A program whose names
do not change from one step to the next pays two walks per power of two instead of one.

NOTE [Steps without backward]
A loop without backward (inference that keeps its outputs with their graph, a fault-injection campaign
that registers a hook per trial, a cache filled in eval) has no backward call to sample at. Its step
is the line that repeats: a call of a module from the program's own line, outside any other module's
call (``model(x)``, not the ``Linear`` inside it). A global forward hook
(``torch.nn.modules.module.register_module_forward_hook``, torch 2.2 and later) counts those calls as
boundaries of a second ``Growth`` (``tracker.growth_fwd``), sampled on the same schedule; the hook
returns None, so every output is the module's own. A global hook takes each module call off
``_call_impl``'s fast path, so the hook is removed at the first backward call that returns: a training
loop pays it for its first forward only, and its findings are the backward samples' as before. The
forward samples are reported only when the run made no backward call (an evaluation loop after training
is not sampled). A call is top-level when no frame of ``torch/nn/modules/module.py``'s ``_call_impl``
is above the program's calling frame (walked at most 64 frames up); calls made while tracing or
compiling are not counted. A program that calls ``torch.compile`` loses the hook there (``stop``): dynamo
would trace the hook's Python code into the compiled frames (graph breaks, and "Dynamo does not know how
to trace the builtin" warnings for what the hook calls), and torch 2.9 and later warn at every
``OptimizedModule`` call site while any global module hook is registered; under python neither happens.

NOTE [Python's traceback under the global forward hook]
With the hook in place every module call takes ``_call_impl``'s slow path, so an exception raised in a
``forward`` (a shape mismatch in the first forward, the commonest error there) would pass through the
slow path's frames: ``return inner()`` and ``inner``'s ``result = forward_call(*args, **kwargs)`` (torch
2.3 and later; on 2.2 the slow path's own ``result = forward_call(...)`` line of ``_call_impl``), where
python shows the fast path's ``return forward_call(*args, **kwargs)``. So the hook is registered with
``always_call=True``: on every release from 2.2 to 2.15, ``_call_impl``'s ``except Exception:`` branch
(``result`` and ``args`` bound there) calls it before its bare ``raise``, with the exception being handled.
Called there (the handled exception's newest entry is the calling ``_call_impl`` frame itself) and when
python would have taken the fast path (the module has no hooks of its own, and no global hook but this
one), the hook replaces that entry and the ``inner`` entry after it by one entry of the same frame at
the fast path's call: its ``tb_lasti`` and ``tb_lineno`` are measured once at import, by calling a probe
module whose ``forward`` raises while no global hook is registered (``fast_path_entry``), so the line, the
3.11+ carets and ``traceback.extract_tb`` are python's on every release without reading torch's source.
From Python 3.11 a bare ``raise`` re-raises the exception with its ``__traceback__``, so the new chain is
set there; on 3.10 it restores the traceback its ``except`` caught, so the replacement is made one frame up
on arrival (a one-shot local trace function, as in NOTE [A bare raise on Python 3.10] in frames.py; not
where the program has a trace function of its own, a debugger or coverage: the slow path's entries stay;
where explain's watch traces, only the frame's local function is set).
Every module level the exception passes fixes its own entry. Not reached by this: a ``BaseException``
that is not an ``Exception`` (``KeyboardInterrupt`` in a forward: torch's ``except Exception`` does not run
the hook), whose uncaught traceback ``python_call_entries`` rewrites the same way before it is printed;
and ``inspect.stack()`` inside a ``forward``, which sees the ``inner`` frame while the hook is in place.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import types
import weakref

import torch

from tensorscope.instrument import frames, retention
from tensorscope.instrument.retention import PIN_MIN_BYTES, PIN_RATIO
from tensorscope.instrument.recorder import node_name

_EARLY = frozenset({2, 3, 4, 5, 6})
WALK_BUDGET = 20_000
# a container of tensors without a graph is reported from this growth per step (a list of detached
# scalars or of small predictions is not); a graph kept alive, a hook or a pinned view from any growth
MIN_CONTAINER_BYTES_PER_STEP = 64 * 1024


_WINDOW = 5  # samples at most in a window of consecutive boundaries (NOTE [Growth inside a short loop])


_MAIN = threading.main_thread()
_MODULE_PY = os.path.join("torch", "nn", "modules", "module.py")
_CALL_IMPLS = frozenset({"_call_impl", "_wrapped_call_impl"})


def _tracing() -> bool:
    try:
        if torch.jit.is_tracing():
            return True
        compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
        return bool(compiling and compiling())
    except Exception:
        return False


def forward_hook(tracker):
    """The global forward hook of a run (NOTE [Steps without backward]); returns None."""
    ref = weakref.ref(tracker)

    def module_forward_done(module, args, output):
        t = ref()
        if t is not None and t.active:
            t.growth_fwd.forward_done(module)
    return module_forward_done


_M = torch.nn.modules.module
_get_sequence_nr = torch._C._autograd._get_sequence_nr
_RERAISE_KEEPS_CAUGHT = frames.RERAISE_KEEPS_CAUGHT_TRACEBACK  # Python 3.10 (NOTE [A bare raise on Python 3.10])


def fast_path_entry():
    """``(code, tb_lasti, tb_lineno)`` of ``_call_impl``'s entry when an exception leaves a ``forward`` that
    the fast path called, measured on a probe module (NOTE [Python's traceback under the global forward
    hook]); None where it cannot be measured (a global hook already registered: the slow path ran)."""
    class _Probe(torch.nn.Module):
        def forward(self):
            raise LookupError("tensorscope probe")

    try:
        probe = _Probe()
    except Exception:
        return None
    try:
        probe()
    except LookupError as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_name != "_call_impl":
            tb = tb.tb_next
        try:
            if tb is None or tb.tb_next is None or tb.tb_next.tb_frame.f_code is not _Probe.forward.__code__ \
                    or not tb.tb_frame.f_code.co_filename.endswith(_MODULE_PY):
                return None
            return tb.tb_frame.f_code, tb.tb_lasti, tb.tb_lineno
        finally:
            tb = e = None
    except Exception:
        return None
    return None


_FAST = fast_path_entry()


def _python_fast(module) -> bool:
    """Whether python would have called ``module`` on ``_call_impl``'s fast path: no hooks of its own, and
    no global hook but tensorscope's."""
    try:
        if module._backward_hooks or module._backward_pre_hooks or module._forward_hooks \
                or module._forward_pre_hooks or _M._global_backward_pre_hooks or _M._global_backward_hooks \
                or _M._global_forward_pre_hooks:
            return False
        return all(frames.is_tensorscope_file(getattr(getattr(h, "__code__", None), "co_filename", ""))
                   for h in _M._global_forward_hooks.values())
    except Exception:
        return False


def _fast_entry(tb):
    """The fast path's entry for ``tb``, a slow-path ``_call_impl`` entry, linked to what follows its
    ``inner`` entry (torch 2.3 and later) or to what follows it (2.2); None if ``tb`` is not one."""
    if _FAST is None or tb is None or tb.tb_frame.f_code is not _FAST[0] or tb.tb_lasti == _FAST[1]:
        return None
    rest = tb.tb_next
    if rest is not None and rest.tb_frame.f_code.co_name == "inner" \
            and rest.tb_frame.f_code.co_filename == _FAST[0].co_filename:
        rest = rest.tb_next
    if rest is None:
        return None
    return types.TracebackType(rest, tb.tb_frame, _FAST[1], _FAST[2])


def on_forward_error(module) -> bool:
    """The global forward hook called from ``_call_impl``'s ``except`` branch (``always_call``): give the
    exception python's traceback (NOTE [Python's traceback under the global forward hook]). True when
    called there (not a boundary). Never raises."""
    try:
        caller = sys._getframe(2)
        code = caller.f_code
        if code.co_name != "_call_impl" or not code.co_filename.endswith(_MODULE_PY):
            return False  # called from inner (torch 2.3 and later): the normal path
        exc = sys.exc_info()[1]
        tb = exc.__traceback__ if exc is not None else None
        if tb is None or tb.tb_frame is not caller:
            return False  # the normal path (2.2 calls the hook from _call_impl too), inside an except of the program
        if _FAST is None or not _python_fast(module):
            return True
        new = _fast_entry(tb)
        if new is None:
            return True
        if not _RERAISE_KEEPS_CAUGHT:
            exc.__traceback__ = new
        else:
            _arm_replace(caller.f_back, tb, new)
        return True
    except Exception:
        return False
    finally:
        caller = code = exc = tb = new = None


def _arm_replace(frame, old, new) -> None:
    """Python 3.10: on the exception's arrival in ``frame``, link its entry to ``new`` instead of ``old``."""
    tracer = sys.gettrace()
    if frame is None or frame.f_trace is not None or tracer is not None and not _ours(tracer):
        return

    def _replace_on_arrival(f, event, arg):
        nonlocal old, new
        f.f_trace = None
        if sys.gettrace() is _trace_nothing:
            sys.settrace(None)
        try:
            if event == "exception" and arg[2] is not None and arg[2].tb_next is old:
                arg[2].tb_next = new
        finally:
            old = new = None
        return None

    frame.f_trace = _replace_on_arrival
    if tracer is None:
        sys.settrace(_trace_nothing)


def _ours(tracer) -> bool:
    """A trace function of tensorscope's (explain's watch, NOTE [Watching exposed saved bytes] in watch.py)."""
    code = getattr(getattr(tracer, "__func__", tracer), "__code__", None)
    return code is not None and frames.is_tensorscope_file(code.co_filename)


def _trace_nothing(frame, event, arg):
    return None


def python_call_entries(exc: BaseException) -> None:
    """An uncaught exception's traceback with python's ``_call_impl`` entries where the slow path ran only
    for tensorscope's hook (a ``BaseException`` that torch's ``except Exception`` let by). Never raises."""
    try:
        if _FAST is None or isinstance(exc, Exception):
            return
        prev, tb = None, exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code is _FAST[0] and tb.tb_lasti != _FAST[1]:
                module = tb.tb_frame.f_locals.get("self")
                new = _fast_entry(tb) if module is not None and _python_fast(module) else None
                if new is not None:
                    if prev is None:
                        exc.__traceback__ = new
                    else:
                        prev.tb_next = new
                    tb = new
            prev, tb = tb, tb.tb_next
    except Exception:
        pass


def due(n: int) -> bool:
    return n in _EARLY or (n >= 8 and n & (n - 1) == 0)


class Growth:
    """The samples of one run (plain data: storage addresses, byte counts, labels)."""

    def __init__(self, tracker, unit: str = "backward"):
        self.tracker = tracker
        self.unit = unit  # what a boundary is: "backward" (call) or "forward" (NOTE [Steps without backward])
        self.handle = None  # the global forward hook of a forward Growth, until the first backward
        self.boundaries = 0
        self.samples: list[dict] = []
        self.seconds = 0.0
        # storage address -> (weak reference to its storage, the step it was first sampled at)
        self._born: dict[int, tuple] = {}
        # TENSORSCOPE_NO_RETENTION=1: no samples and no Memory held (benchmarks/run.py's comparison mode)
        self.enabled = not os.environ.get("TENSORSCOPE_NO_RETENTION")
        self._found: list | None = None  # the findings, once settled (NOTE [Growth settled when the program ends])

    def boundary(self, frame) -> None:
        """A backward call returned: sample at the boundaries ``due`` picks. Never raises."""
        if self.unit == "backward" and self.boundaries == 0:
            self.tracker.growth_fwd.stop()  # see NOTE [Steps without backward]
        self.boundaries += 1
        if frame is None or not self.enabled or self._found is not None or not (due(self.boundaries) or self._follow()):
            return
        t0 = time.perf_counter()
        tracker = self.tracker
        tracker.pause()  # NOTE [Pausing the recorder] in tracker.py
        roots = walk = None
        try:
            with torch._C.DisableTorchFunction():
                roots = retention.frame_roots(frame, tracker.user)
                walk = retention.Walk(tracker.user, budget=WALK_BUDGET).run(roots)
                roots = None
                self.samples.append(self._sample(walk))
        except Exception:
            pass
        finally:
            if walk is not None:
                walk.release()
            roots = walk = None
            tracker.resume()
            self.seconds += time.perf_counter() - t0

    def stop(self) -> None:
        """A backward call returned: forward boundaries are no longer counted (NOTE [Steps without backward])."""
        handle, self.handle = self.handle, None
        self.samples = []
        self._born = {}
        self.enabled = False
        if handle is not None:
            try:
                handle.remove()
            except Exception:
                pass

    def forward_done(self, module) -> None:
        """The global forward hook: a top-level module call from a program line is a boundary. Never raises."""
        try:
            if not self.enabled or threading.current_thread() is not _MAIN or _tracing():
                return
            user = self.tracker.user
            f = sys._getframe(2)
            caller = None
            n = 0
            while f is not None and n < 64:
                code = f.f_code
                if code.co_filename.endswith(_MODULE_PY):
                    if caller is not None and code.co_name in _CALL_IMPLS:
                        return  # inside another module's call
                elif caller is None:
                    if code.co_filename not in user:
                        return
                    caller = f
                f, n = f.f_back, n + 1
            f = None
            if caller is not None:
                self.boundary(caller)
            caller = None
        except Exception:
            pass

    def _follow(self) -> bool:
        """Whether this boundary goes on a window opened at a power of two (NOTE [Growth inside a short loop])."""
        n = self.boundaries
        if n < 8 or not self.samples or self.samples[-1]["step"] != n - 1:
            return False
        start = 1 << ((n - 1).bit_length() - 1)  # the power of two that opened the window
        if n - start >= _WINDOW:
            return False
        if n - 1 == start:
            return True
        last = self.samples[-1]
        return last["moved"] and not _rising(self.samples[-3:])

    def _sample(self, walk) -> dict:
        keys: dict[int, set] = {}
        born = self._births(walk)
        for key, (nbytes, r, tid) in walk.storages.items():
            b = born.get(key)
            ident = _identity(walk, key, tid, b[1] if b is not None else None)
            if b is not None:  # the previous sample's equal identity, shared (NOTE [Samples share what did not change])
                if b[2] == ident:
                    ident = b[2]
                else:
                    born[key] = (b[0], b[1], ident)
            keys.setdefault(r, set()).add(ident)
        rb = walk.root_bytes()
        prev = self.samples[-1]["roots"] if self.samples else {}
        before = self.samples[-2]["roots"] if len(self.samples) > 1 else {}
        roots = {}
        for r, info in enumerate(walk.roots):
            name = info["name"]
            if name in roots:
                continue
            entry = {"where": info["where"], "type": info["type"], "bytes": rb.get(r, 0),
                     "nodes": walk.nodes.get(r, 0), "keys": frozenset(keys.get(r, ())), "oldest": walk.oldest.get(r)}
            old = prev.get(name)
            if old is not None and old["keys"] == entry["keys"]:
                entry["keys"] = old["keys"]  # one set for every sample where it stayed the same
            new = entry["keys"] - old["keys"] if old is not None else entry["keys"]
            grew = old is not None and (entry["bytes"] > old["bytes"] or entry["nodes"] > old["nodes"])
            if grew:
                # storages new at the previous sample and still held now: what is kept, not what is replaced
                # each step (a `.grad`, this step's batch)
                older = before.get(name)
                kept = (old["keys"] - older["keys"]) & entry["keys"] if older is not None else frozenset()
                entry["witness"] = self._witness(walk, r, kept or new)
            roots[name] = entry
        moved = any(name not in prev or (e["bytes"], e["nodes"]) != (prev[name]["bytes"], prev[name]["nodes"])
                    for name, e in roots.items()) or any(name not in roots for name in prev)
        return {"step": self.boundaries, "truncated": walk.truncated, "roots": roots, "moved": moved,
                "aseq": _get_sequence_nr()}

    def _births(self, walk) -> dict[int, tuple]:
        """Each storage's first sampled step, kept while the object it was reached through lives (a weak
        reference to that tensor: a new tensor at a freed storage's address is a new birth). See NOTE
        [Storage identity across samples]. The table itself, ``key -> (weak reference, step, identity at
        the last sample or None)``: ``_sample`` puts each storage's new identity in it."""
        old, now = self._born, {}
        step = self.boundaries
        for key, (_, _, tid) in walk.storages.items():
            seen = old.get(key)
            if seen is not None and seen[0]() is not None:
                now[key] = seen
                continue
            try:
                ref = weakref.ref(walk.obj(tid))  # never .untyped_storage(): that makes a Python object gc sees
            except Exception:  # nothing to watch: compared by address, as before the births
                continue
            now[key] = (ref, step, None)
        self._born = now
        return now

    def _witness(self, walk, r, new_keys) -> dict:
        """The path to the largest storage new under root ``r``, or to its graph: on equal bytes, one
        not held as a leaf's ``.grad`` (backward replaces it each step), then the first in walk order."""
        best = None
        order = {key: i for i, key in enumerate(walk.storages)}
        for ident in sorted(new_keys, key=lambda i: order[i[0]]):
            nbytes, _, tid = walk.storages[ident[0]]
            rank = (nbytes, ident[2] != ".grad")
            if best is None or rank > best[0]:
                best = (rank, tid)
        best = (best[0][0], best[1]) if best is not None else None
        target = best[1] if best is not None else walk.first_node.get(r)
        if target is None:
            return {}
        steps = walk.path(target)
        out = {"path": steps, "storage_nbytes": best[0] if best else 0}
        if _in_torch_optimizer_state(walk, target):  # NOTE [An optimizer's own history]
            out["optimizer_own"] = True
        obj = walk.obj(target)
        if isinstance(obj, torch.Tensor):
            try:
                out["nbytes"] = obj.numel() * obj.element_size()
                out["is_view"] = obj._base is not None
                out["shape"] = list(obj.shape)
                out["device"] = obj.device.type
            except Exception:
                pass
            out["alloc"] = self._alloc(obj, walk, target)
        else:
            out["alloc"] = self._node_alloc(obj)
        return out

    def _alloc(self, t, walk, target) -> dict | None:
        """Where the retained memory was allocated: the tensor's recorded creation, or the forward line
        of the graph node that saved it, or of its own grad_fn."""
        tracker = self.tracker
        try:  # a view's memory was allocated where its base was made (`batch = randn(...)`, not `batch[0]`)
            base = t._base
            for owner in ((base, t) if base is not None else (t,)):
                c = tracker.tensor_created.get(tracker.tid(owner))
                if c and c.get("file") in tracker.user:
                    return {"file": c["file"], "line": c["line"], "how": c.get("how")}
        except Exception:
            pass
        parent, step = walk.step(target)
        if parent is not None and step.get("via") == "saved":
            found = self._node_alloc(walk.obj(parent))
            if found:
                return found
        try:
            base = t._base
            gf = t.grad_fn if base is None else base.grad_fn
        except Exception:
            gf = None
        return self._node_alloc(gf)

    def _node_alloc(self, node) -> dict | None:
        if node is None:
            return None
        try:
            seq = node._sequence_nr()
            file, line = self.tracker.node_line(seq)
        except Exception:
            return None
        if line is None:
            return None
        return {"file": file, "line": line, "how": node_name(node)}

    def findings(self) -> list[dict]:
        """Raw facts of each name that grew at its last three samples (torch-free)."""
        if self._found is not None:  # NOTE [Growth settled when the program ends]
            return list(self._found)
        return findings(self.samples)

    def settle(self) -> None:
        """The program has ended: its findings now, and the samples' storages and births let go (NOTE [Growth
        settled when the program ends]). Not for a block of the API, whose program goes on."""
        if self._found is not None:
            return
        try:
            found = findings(self.samples)
        except Exception:  # kept as they are: ``findings`` tries again under the report's own guard
            return
        self._found = found
        self.samples = [{"step": s["step"]} for s in self.samples]
        self._born = {}


def _identity(walk, key, tid, born) -> tuple:
    """A storage as the samples compare it: its address, the object and step it was first reached
    through, and its birth. See NOTE [Storage identity across samples]."""
    parent, label = walk.label(tid)
    return (key, parent, label, born)


# NOTE [Growth settled when the program ends]
# The samples hold, per name, the identity of each storage it reached (an address, a label, a birth), and
# ``_born`` a weak reference and an identity per storage: on a model of 5,000 parameters trained with Adam,
# 12,469 storages at the one backward sample, ~4.6 MB traced, alive under the end-of-run snapshot and the
# report, the run's peak memory (benchmarks/RESULTS.md, "memp18, 2026-11-27"). Once the program has ended
# nothing samples again, and the samples are read only for their findings (``findings``, torch-free, from the
# samples alone) and their steps (the memory object's ``sampled_steps``). So the command line settles each
# ``Growth`` when the program ends (instrument.session.release_run_state): the findings are made then, the
# same list ``findings`` would make later, and each sample keeps its step only. A boundary after that (a
# backward call the report's own work cannot make, but a thread the program left running could) samples
# nothing. The API's blocks are not settled: the program goes on after them.

# NOTE [Samples share what did not change]
# A sample keeps, per name, the set of its storages' identities (NOTE [Storage identity across samples]), and
# a run keeps every sample. Made afresh each time, a name holding 5,000 parameters cost about 1 MB a sample
# (a tuple, a label string and a set entry per storage): a loop of 2,500 top-level module calls, sampled 17
# times before its first backward (NOTE [Steps without backward]), left 31 MB resident under the rest of the
# run (benchmarks/RESULTS.md, "mem15, 2026-11-26"). So an identity equal to the one the storage had at the
# last sample is that same tuple (kept beside its birth in ``_born``), and a name's set equal to its set at the
# last sample is that same set: a sample then costs what changed. Equal values, so every comparison reads the
# same as before.

# NOTE [Storage identity across samples]
# A storage's address (its StorageImpl) is reused by the allocator once the storage is freed: a leaf's
# `.grad` freed by `zero_grad()` and the gradient a hook appends to a list next step can share one
# address across two samples, so "new since the last sample" and "kept since the previous one" read
# by address alone depended on where malloc put each step's tensors. A storage is therefore compared
# by its address, the object and label it was first reached through (`seen` and `[5]`; `weight` and
# `.grad`), and its birth: the step of the first sample that saw it, carried from sample to sample by a
# weak reference to the tensor it was reached through, so a reference that died means a new birth.
# The weak reference is to the tensor, not to its storage object: torch keeps a storage's Python object
# while the storage lives (2.2.2, 2.6.0, 2.13.0), so asking for one would leave objects in
# `gc.get_objects()` that plain python never made (tests/programs/heap_census.py). A storage reached
# through a new tensor object (a fresh view of a kept buffer each step) reads as a new birth; it adds no
# bytes, and growth needs bytes or graph nodes that rose at each of three samples. Without the birth,
# a `.weight.grad` at one address at steps 6 and 8 and at another at step 5 read as kept since step 6,
# and being larger than the list's new items it was the witness: the forward hook of
# corpus_retention/hook_collects_inputs_cpu.py was reported as `container-grows` with no line in some
# runs (where malloc puts a step's tensors differs between processes, more so under load).


# NOTE [An optimizer's own history]
# torch.optim.LBFGS keeps its last `history_size` (default 100) curvature pairs in its `.state` (`old_dirs`,
# `old_stps`, `ro`: torch/optim/lbfgs.py pops the oldest once the lists are full): one pair of
# parameter-sized vectors more at each iteration, so a run of fewer than 100 iterations (pytorch/examples'
# time_sequence_prediction shrunk to 3 steps of max_iter=20) saw `optimizer` grow at every sampled backward
# call, and `container-grows` told the user to clear a container they never made, in the program and in its
# fixed twin alike. The memory is bounded by the optimizer's own algorithm, so growth whose witness lies in the
# `.state` of an optimizer of torch's own (its class defined in `torch.optim`) is not a container growing. A
# graph kept there is still reported (`graph-kept-alive`), and so is growth in the state of an optimizer the
# program defines.


def _in_torch_optimizer_state(walk, target) -> bool:
    """Whether the walk reached ``target`` through the ``.state`` of an optimizer class of torch's own."""
    k, n = target, 0
    while k is not None and n < 64:
        parent, step = walk.step(k)
        if step.get("via") == "optimizer_state":
            return (getattr(type(walk.obj(parent)), "__module__", None) or "").startswith("torch.optim")
        k, n = parent, n + 1
    return False


# NOTE [A closure that no hook holds]
# A path through a function's closure cell or default argument is a hook's only where the function is a
# registered hook (a ``hook`` step on the path: a module's or a tensor's hook dict). A function the program keeps
# itself (``log_lines.append(lambda l=loss: f"{l.item():.4f}")`` each step, a dict of callbacks) is a value in a
# container like any other: a graph it keeps is graph-kept-alive and a small detached value (4 B a step, the twin
# with ``l=loss.detach()``) is under container-grows' 64 KB a step, so no finding. Seen on karpathy's
# ng-video-lecture gpt.py with a deferred log line: "hook-holds-tensors ... remove the hook" where there was no
# hook, and the same for the detached twin. A hook registered again each step stays hook-holds-tensors at any size.


def family(witness: dict, nodes_grew: bool) -> str:
    vias = {s.get("via") for s in witness.get("path") or ()}
    if "hook" in vias:  # NOTE [A closure that no hook holds]
        return "hook-holds-tensors"
    if vias & {"grad_fn", "saved", "next", "ctx"} or nodes_grew:
        return "graph-kept-alive"
    if witness.get("is_view") and (witness.get("storage_nbytes") or 0) >= PIN_RATIO * max(1, witness.get("nbytes") or 0) \
            and (witness.get("storage_nbytes") or 0) >= PIN_MIN_BYTES:
        return "view-pins-storage"
    return "container-grows"


# NOTE [A graph kept across steps holds an older node]
# A name can reach more graph nodes at each of three samples without keeping any step's graph: the current
# step's graph, alive when its backward call returns and freed later in the step, grows when the steps do.
# pytorch/examples' reinforcement_learning/reinforce.py keeps an episode's log-probabilities in
# ``policy.saved_log_probs`` until after ``optimizer.step()``, and the episodes get longer as the policy learns:
# `policy` and the loss reached 58 and 9 nodes more per episode, reported as graph-kept-alive in the
# unmodified program. A graph kept across steps holds a node built before the previous sample: so graph nodes
# grow only where the name's oldest node (the smallest sequence nr of a node it reaches, AccumulateGrad
# aside: ``Walk.oldest``) is older than the previous sample (autograd's next sequence nr then, ``aseq``).
# Sequence nrs are counted per thread: a graph built on another thread is taken as old (reported as before).


def _grew(series, samples=None) -> tuple[bool, bool]:
    """(bytes, graph nodes) rose at each of three samples of one name, bytes with new storages each time, graph
    nodes with a node older than the previous sample (NOTE [A graph kept across steps holds an older node])."""
    b = [e["bytes"] for e in series]
    n = [e["nodes"] for e in series]
    nodes = n[0] < n[1] < n[2]
    if nodes and samples is not None:
        oldest, before = series[2].get("oldest"), samples[1].get("aseq")
        if oldest is not None and before is not None and oldest >= before:
            nodes = False  # only this step's graph (built since the previous sample)
    return (b[0] < b[1] < b[2] and all(series[i]["keys"] - series[i - 1]["keys"] for i in (1, 2)), nodes)


def _consecutive(three) -> bool:
    return len(three) == 3 and three[2]["step"] - three[0]["step"] == 2


def _rising(three) -> bool:
    """Some name rose at each of three samples taken at consecutive boundaries."""
    if not _consecutive(three):
        return False
    for name in three[-1]["roots"]:
        series = [s["roots"].get(name) for s in three]
        if all(e is not None for e in series) and any(_grew(series, three)):
            return True
    return False


def _windows(samples: list[dict]):
    """The last three samples, then every three samples at consecutive boundaries, latest first (NOTE [Growth
    inside a short loop])."""
    yield samples[-3:]
    for i in range(len(samples) - 1, 2, -1):
        three = samples[i - 3:i]
        if _consecutive(three):
            yield three


def findings(samples: list[dict]) -> list[dict]:
    out = []
    if len(samples) < 3:
        return out
    done: set = set()
    for i, last3 in enumerate(_windows(samples)):
        out += _grown(last3, done, graphs_only=i > 0)
    return out


def _grown(last3: list[dict], done: set, graphs_only: bool = False) -> list[dict]:
    out = []
    for name, entry in last3[-1]["roots"].items():
        if name in done:
            continue
        series = [s["roots"].get(name) for s in last3]
        if any(e is None for e in series):
            continue
        b = [e["bytes"] for e in series]
        n = [e["nodes"] for e in series]
        grew_bytes, grew_nodes = _grew(series, last3)
        if not (grew_bytes or grew_nodes) or (graphs_only and not grew_nodes):
            continue
        witness = series[2].get("witness") or {}
        steps = last3[2]["step"] - last3[0]["step"]
        per_step = (b[2] - b[0]) // steps if grew_bytes else 0
        fam = family(witness, grew_nodes)
        if fam == "container-grows" and (per_step < MIN_CONTAINER_BYTES_PER_STEP or witness.get("optimizer_own")):
            continue
        if fam == "view-pins-storage" and not grew_bytes:
            continue
        done.add(name)
        out.append({
            "kind": fam, "retention": True, "holder": name, "holder_type": entry["type"], "where": entry["where"],
            "path": witness.get("path") or [{"via": "name", "label": name, "type": entry["type"]}],
            "bytes_per_step": per_step, "nodes_per_step": (n[2] - n[0]) // steps if grew_nodes else 0,
            "bytes": b[2], "steps": [s["step"] for s in last3], "bytes_at": b,
            "alloc": witness.get("alloc"), "nbytes": witness.get("nbytes"),
            "storage_nbytes": witness.get("storage_nbytes"), "shape": witness.get("shape"),
            "device": witness.get("device"),
        })
    return out
