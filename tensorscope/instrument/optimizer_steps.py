"""An optimizer's step recorded as one write record: its writes kept as plain tuples, logged when it ends.

NOTE [An optimizer step as one write record]
A training loop's in-place writes are mostly its optimizer's: Adam's single-tensor step makes six per
parameter (``exp_avg.lerp_``, ``exp_avg_sq.mul_().addcmul_``, ``denom.add_``, ``param.addcdiv_``,
``step += 1``), all from torch's own code and all named at the program's ``opt.step()`` line. Past the
first ``per_site`` writes at that line each is only counted and put in the write log (NOTE [The write
fast path] in tracker.py), yet the recorder's walk to the program's line, its per-line count and its
log entry cost about 10 us a write. So a step of one of torch's own optimizers is recorded whole:

- the global optimizer step pre-hook (``register_optimizer_step_pre_hook``, torch 2.0 and later) finds
  the program's line once and indexes the tensors the step may write by ``id`` (each parameter, its
  ``.grad`` and its state tensors, held until the step ends), and puts the thread in ``IN_STEP``;
- inside the step each write wrapper appends one tuple (the tensor, or a weak reference to a tensor not
  in the index, its storage key, the op, torch's function, the versions before and after) and returns:
  no walk, no count, no log entry;
- the post-hook logs those writes in order, as the wrappers would have (``Tracker.log_write``, inlined),
  and counts them all at the line. A write into a tensor not in the index is logged when that tensor is
  a state tensor the step made (the first step of a parameter) and only counted otherwise (the step's
  temporaries, ``denom.add_``, dead by then), as the write-by-write path leaves no other trace of them.

Nothing the program or a check reads differs from the writes recorded one by one: the write log (each
entry's versions are read around its own call), ``events_summary``'s counts and every check that reads
them. A write that needs more than a count and a log entry goes the write-by-write way, after the step's
writes so far are logged (so the log keeps its order): the line's first ``per_site`` writes (its detailed
events: the first step of a run is recorded whole past them), and a write into a storage that a kept
value, shared state or one of explain's saved tensors watches. A step is recorded whole only where the
program's own code cannot run inside it: a class of ``torch.optim``'s own (a subclass could run its code in
``step``), no closure and no other step hook, not ``differentiable`` (its writes build a graph). A step
that raises never reaches its post-hook: the next wrapped write on the thread finds that it is not inside
the step's frame any more, and the step's writes so far are logged then (as they are at a backward call
and at the end of the run).

NOTE [A step's lane]
Once a write of a step recorded whole needs no more than its tuple (``_Step.write`` found the line's detailed
events used up and no watched storage among the step's tensors), the frame of torch's that made it is the
step's *lane*: every later write whose caller is that frame is recorded by the wrapper's first test
(``LANES``, keyed by the frame: a frame runs on one thread, so no thread ident is read), before it reads
the recorder, its pause, its re-entry guard or the frame's file (``patches.make_write``). Those reads cannot
change the outcome there: the step runs no code of the program's (see above), so the recorder stays active
and the thread unpaused until the step's post-hook (``close`` takes the lane away first), and a wrapper
entered again from inside the write's own call (a subclass's ``__torch_function__``, a torch-function mode)
has that code's frame as caller, never the lane; the step's ``busy`` flag, set around the lane's call, sends
such a call straight to torch, as ``IN_WRITE`` does on the other paths. What the lane still checks per
write is what can differ between two writes from one frame: the target's type (inspectable), a
torch-function mode on, and the versions around the call. It records the same tuple ``write`` would.
(``benchmarks/step_instructions.py full 50``, small_mlp's step phase, 24 writes: 1,272.2k instructions
before the lane, 1,219.5k with the lane found by thread, 1,208.5k found by frame.) Where the optional accelerator
is built, the wrapper's lane and this module's write log (``_log_writes``), the step's index (``_index``) and the
log's counts (``add_count``) run in C, with the same results (NOTE [The compiled lane] in speedups.py).
"""

from __future__ import annotations

import sys
import threading
import weakref

import torch
from torch.optim import optimizer as _optimizer

from tensorscope.instrument.frames import _LINES, line_of, user_frame
from tensorscope.instrument.recorder import AGGREGATED as _AGGREGATED, add_count, storage_key as _storage_key
from tensorscope.instrument.records import MAX_LOGGED_STORAGES as _MAX_LOGGED_STORAGES
from tensorscope.instrument.records import MAX_WRITES_PER_STORAGE as _MAX_WRITES_PER_STORAGE
from tensorscope.instrument import speedups as _speedups
from tensorscope.instrument.state import IN_WRITE as _IN_WRITE, PAUSED as _PAUSED

# thread ident -> the step recorded whole that runs on it; read by the write wrappers (patches.py)
IN_STEP: dict = {}
# a step's lane (a frame of torch's) -> the step (NOTE [A step's lane]); a frame runs on one thread only
LANES: dict = {}
#: what ``_Step.write`` returns for a write that goes the write-by-write way
NOT_WHOLE = object()
_get_ident = threading.get_ident
_Tensor = torch.Tensor
_ref = weakref.ref
_RefType = weakref.ReferenceType
_sequence_nr = torch._C._autograd._get_sequence_nr
_is_grad_enabled = torch.is_grad_enabled
_is_compiling = getattr(torch.compiler, "is_compiling", None)


class _Step:
    """One step recorded whole: where it runs, the tensors it may write, the writes made so far."""

    __slots__ = ("rec", "opt", "frame", "inner", "uf", "line", "site", "aseq", "index", "writes", "detail",
                 "budget", "watched", "grad_enabled", "lane", "lib", "busy")

    def __init__(self, rec, opt, frame, uf, line, site, index):
        self.rec, self.opt, self.frame, self.uf, self.line, self.site = rec, opt, frame, uf, line, site
        self.inner = None  # the last frame of torch's that was found to run inside the step
        self.aseq = _sequence_nr()  # no autograd node is made inside a (non-differentiable) step
        self.index = index  # id -> tensor: the parameters, gradients and state tensors at the start
        self.writes = []  # (tensor or weak reference, op, torch's code, version before, version after)
        self.budget = True  # the line may still have detailed events left (checked until it has none)
        # ids of the step's tensors on a storage that a kept value, shared state or a saved tensor of
        # explain's watches (none of these can start inside torch's step: it runs no code of the program's)
        self.watched = _watched(rec, index)
        self.detail = True  # some write may need the write-by-write way: ``needs_detail`` says which
        self.grad_enabled = None
        # NOTE [A step's lane]: the frame of torch's whose writes need no more than their tuple, once the grad
        # mode is read (``inner`` then), and its code; ``busy`` while a write from it runs
        self.lane = self.lib = None
        self.busy = False

    def inside(self, frame) -> bool:
        """Whether ``frame`` (a write's caller) runs inside this step. A step that raised ran no post-hook:
        the first write after it finds the step's frame gone from its stack, and the step is closed."""
        f = frame
        target = self.frame
        while f is not None:  # torch's steps write about six frames below their wrapper
            if f is target:
                self.inner = frame
                return True
            f = f.f_back
        rec = self.rec
        if rec is not None:
            rec.steps.close(_get_ident())
        return False

    def needs_detail(self, targets) -> bool:
        """Whether a write into ``targets`` goes the write-by-write way (see the NOTE); if so, the step's
        writes so far are logged first, so the write log keeps its order."""
        rec = self.rec
        if self.budget:
            if rec.site_counts.get(self.site, 0) < rec.per_site and len(rec.events) < rec.max_events:
                self.flush()
                return True
            self.budget = False
        watched = self.watched
        if not watched:
            self.detail = False
            return False
        for t in targets:
            if id(t) in watched:
                self.flush()
                return True
        return False

    def write(self, orig, op, target, args, kwargs, frame, ident):
        """One single-tensor write inside the step (from ``patches.make_write``): the call and its tuple,
        or ``NOT_WHOLE`` when the write goes the write-by-write way (nothing called then)."""
        if frame is not self.inner and not self.inside(frame):
            return NOT_WHOLE
        if self.detail and self.needs_detail((target,)):
            return NOT_WHOLE
        if self.grad_enabled is None:
            self.grad_enabled = _is_grad_enabled()  # torch's step runs all its writes in one mode
        if not self.detail and self.lane is not frame:  # every later write from this frame takes the lane
            if self.lane is not None:
                LANES.pop(self.lane, None)
            self.lane, self.lib = frame, frame.f_code
            LANES[frame] = self
        v0 = target._version
        _IN_WRITE.add(ident)  # a wrapper re-entered under a TorchFunctionMode records nothing twice
        try:
            out = orig(*args, **kwargs)
        finally:
            _IN_WRITE.discard(ident)
        t = self.index.get(id(target))
        self.writes.append((t if t is not None else _ref(target), op, frame.f_code, v0, target._version))
        return out

    def write_many(self, orig, op, targets, args, kwargs, frame):
        """A ``_foreach_`` write inside the step: as ``write``, one tuple per tensor written."""
        if frame is not self.inner and not self.inside(frame):
            return NOT_WHOLE
        if self.detail and self.needs_detail(targets):
            return NOT_WHOLE
        if self.grad_enabled is None:
            self.grad_enabled = _is_grad_enabled()  # torch's step runs all its writes in one mode
        before = [t._version for t in targets]
        out = orig(*args, **kwargs)
        index, append, code = self.index, self.writes.append, frame.f_code
        for t, v0 in zip(targets, before):
            known = index.get(id(t))
            append((known if known is not None else _ref(t), op, code, v0, t._version))
        return out

    def flush(self) -> None:
        """Log the step's writes so far (see ``OptimizerSteps.log``)."""
        if self.writes:
            self.rec.steps.log(self)


class OptimizerSteps:
    """The optimizer steps of one run (see NOTE [An optimizer step as one write record])."""

    def __init__(self, rec):
        self.rec = rec
        self._hooks_ours: dict = {}  # (number of global pre-hooks, of post-hooks) -> all tensorscope's
        self.whole = 0  # steps recorded whole (for the benchmarks and tests)
        # the log's loop in C where the accelerator is built (NOTE [The compiled lane] in speedups.py)
        self._log_writes = _speedups.log_writes()
        self._step_index = _speedups.function("step_index")  # _index in C
        self._add_count = _speedups.function("add_count") or add_count
        # the compiled log's keys read in place where found (NOTE [A storage key read in place] in speedups.py)
        self._storage_key = _speedups.storage_key() or _storage_key

    # --- the hooks ------------------------------------------------------------------------------------

    def started(self, opt, args, kwargs) -> None:
        """The global step pre-hook: record the step whole where the program's code cannot run in it."""
        if _is_compiling() if _is_compiling is not None else _compiling():  # first: nothing here is traceable
            return
        rec = self.rec
        try:
            ident = _get_ident()
            if not rec.active or ident in IN_STEP or ident in _PAUSED or not self._eligible(opt, args, kwargs):
                return
            frame = sys._getframe(2)  # torch's profile_hook_step wrapper, the frame the step runs under
            uf = user_frame(frame, rec.user)
            if uf is None:
                return
            code = uf.f_code
            line = _LINES.get((id(code), uf.f_lasti))  # NOTE [Line cache entries: the line as the value, the code held apart]
            if line is None:
                line = line_of(uf)
            step_index = self._step_index
            index = (_index(opt) if step_index is None
                     else step_index(opt.param_groups, opt.state.values(), _Tensor))  # the same dict
            IN_STEP[ident] = _Step(rec, opt, frame, uf, line, ("write", code.co_filename, line), index)
        except Exception:
            _drop(_get_ident())

    def finished(self, opt, args, kwargs) -> None:
        """The global step post-hook: log the writes of a step recorded whole."""
        if _is_compiling() if _is_compiling is not None else _compiling():  # ``_compiling()``, its frame saved
            return
        try:
            ident = _get_ident()
            step = IN_STEP.get(ident)
            if step is not None and step.opt is opt:
                self.close(ident)
        except Exception:
            _drop(_get_ident())

    # --- leaving a step -------------------------------------------------------------------------------

    def sweep(self) -> None:
        """Log a step recorded whole on this thread that raised (called at a backward call)."""
        ident = _get_ident()
        step = IN_STEP.get(ident)
        if step is not None and not _running(step.frame):
            self.close(ident)

    def close_all(self) -> None:
        """The end of the run: log every step still open (one that raised, on any thread)."""
        for ident in list(IN_STEP):
            self.close(ident)

    def close(self, ident) -> None:
        """Log the writes of the step recorded whole on thread ``ident`` and leave it."""
        step = IN_STEP.pop(ident, None)
        if step is None:
            return
        if step.lane is not None:
            LANES.pop(step.lane, None)
            step.lane = None
        # the frame of torch's that ran the writes, ended now, held the last temporaries it wrote (Adam's last
        # ``denom``): let it go first, so that the log finds them dead and reads no state
        step.inner = None
        try:
            self.log(step)
        except Exception:
            pass
        step.opt = step.rec = step.frame = step.inner = step.uf = step.index = step.writes = None
        self.whole += 1

    # --- inside ---------------------------------------------------------------------------------------

    def _eligible(self, opt, args, kwargs) -> bool:
        if not type(opt).__module__.startswith("torch.optim."):
            return False
        if len(args) > 1 or kwargs and any(v is not None for v in kwargs.values()):  # a closure: the program's code
            return False
        if opt._optimizer_step_pre_hooks or opt._optimizer_step_post_hooks:
            return False
        pre, post = _optimizer._global_optimizer_pre_hooks, _optimizer._global_optimizer_post_hooks
        lens = (len(pre), len(post))  # tensorscope's own are never removed during a run
        ours = self._hooks_ours.get(lens)
        if ours is None:  # tensorscope's own (these, the non-finite checks') only
            ours = self._hooks_ours[lens] = all((getattr(h, "__module__", None) or "").startswith("tensorscope.")
                                                for h in list(pre.values()) + list(post.values()))
        if not ours:
            return False
        for g in opt.param_groups:
            if g.get("differentiable"):
                return False
        return True

    def log(self, step) -> None:
        """Log the step's writes so far, in order, as the wrappers would have (``Tracker.log_write`` and
        ``Tracker.write_site``'s count, inlined), and count them all at the step's line."""
        writes = step.writes
        if not writes:
            return
        step.writes = []
        rec = self.rec
        uf, line = step.uf, step.line
        code, lasti = uf.f_code, uf.f_lasti
        aseq, grad_enabled = step.aseq, step.grad_enabled
        log = rec.write_log
        log_writes = self._log_writes
        if log_writes is not None:  # NOTE [The compiled lane] in speedups.py: _log_writes in C
            log_writes(writes, log, self._storage_key, _state_ids, step.opt, (aseq, grad_enabled, code, lasti, line),
                       _MAX_LOGGED_STORAGES, _MAX_WRITES_PER_STORAGE)
        else:
            _log_writes(writes, log, step.opt, aseq, grad_enabled, code, lasti, line)
        n = len(writes)
        counts = rec.site_counts
        before = counts.get(step.site, 0)
        add = self._add_count  # recorder.add_count, in C where the accelerator is built
        add(counts, step.site, n)  # NOTE [Site counts from several threads] in recorder.py
        add(rec.aggregated_counts, _AGGREGATED, n)  # count_aggregated(rec, n)
        if before < rec.per_site:  # only the event cap made these writes plain (see Tracker.write_site)
            rec.log_full = True


def _log_writes(writes, log, opt, aseq, grad_enabled, code, lasti, line) -> None:
    """``OptimizerSteps.log``'s loop: each write's entry under its storage's key in the write log, in order."""
    get, last = log.get, log.move_to_end
    made = None  # ids of the state tensors the step made (only looked for when one was written)
    prev = recs = None  # the tensor of the write before and its storage's entries
    for t, op, lib, v0, v1 in writes:
        if t is not prev:
            if type(t) is _RefType:  # a tensor not in the index: a state tensor the step made, or a temporary
                t = t()
                if t is None:
                    continue
                if made is None:
                    made = _state_ids(opt)
                if id(t) not in made:
                    continue
            try:  # read again where a tensor comes back (a foreach step): all keys are read after the step
                key = _storage_key(t)
            except Exception:  # no storage: the wrappers log none either
                continue
            recs = get(key)
            if recs is None:  # least recently written storage out first: O(1) (an OrderedDict)
                if len(log) >= _MAX_LOGGED_STORAGES:
                    log.popitem(last=False)
                recs = log[key] = []
            else:
                last(key)
            prev = t
        # the same tensor as the write before (Adam's ``exp_avg_sq.mul_().addcmul_``): its storage is the
        # last written already, and its entries are ``recs``
        if len(recs) >= _MAX_WRITES_PER_STORAGE:
            del recs[0]
        recs.append((aseq, v0, v1, op, grad_enabled, code, lasti, line, lib, None))


def _drop(ident) -> None:
    """Leave the step on thread ``ident`` without logging it (a failure inside a hook), its lane too: a lane
    left in ``LANES`` would keep the frame's temporaries and the step's tensors alive."""
    step = IN_STEP.pop(ident, None)
    if step is not None and step.lane is not None:
        LANES.pop(step.lane, None)
        step.lane = None


def _index(opt) -> dict:
    """id -> tensor of every tensor the step may write: each parameter, its ``.grad``, its state tensors.

    The state is read through ``opt.state.values()``, not looked up by parameter: a tensor's ``__hash__`` is a
    Python function of torch's (``Tensor.__hash__``), one call per parameter per step. Every state a step may
    write is filed under one of its parameters; a state left under a parameter no group holds any more only
    adds its tensors to the index (kept until the step ends, as the parameters are), and no write of the step
    is recorded differently for it."""
    index = {}
    for group in opt.param_groups:
        for p in group["params"]:
            index[id(p)] = p
            g = p.grad
            if g is not None:
                index[id(g)] = g
    for s in opt.state.values():
        if s:
            for v in s.values():
                if isinstance(v, _Tensor):
                    index[id(v)] = v
    return index


def _watched(rec, index) -> set:
    """ids of the tensors in ``index`` whose storage a kept value, shared state or a saved tensor of
    explain's watches (their writes need more than a count and a log entry)."""
    if rec.kept.young:  # see NOTE [Young kept values] in kept.py
        rec.kept.settle(rec)
    kept, shared, pending = rec.kept.keys, rec.shared.keys, rec.pending
    if not (kept or shared or pending):
        return set()
    out = set()
    for i, t in index.items():
        try:
            key = _storage_key(t)
        except Exception:
            out.add(i)
            continue
        if key in kept or key in shared or key in pending:
            out.add(i)
    return out


def _state_ids(opt) -> set:
    """ids of the optimizer's state tensors now."""
    return {id(v) for s in opt.state.values() for v in s.values() if isinstance(v, _Tensor)}


def _compiling() -> bool:
    """Whether torch.compile is tracing this call (the hook then traces as nothing: the compiled step's
    writes are inside its graph, where no wrapper sees them either)."""
    if _is_compiling is not None:
        return _is_compiling()
    dynamo = sys.modules.get("torch._dynamo")  # torch 2.2: no torch.compiler.is_compiling
    return bool(dynamo is not None and dynamo.is_compiling())


def _running(frame) -> bool:
    """Whether ``frame`` is on the calling thread's stack."""
    f = sys._getframe(1)
    while f is not None:
        if f is frame:
            return True
        f = f.f_back
    return False
