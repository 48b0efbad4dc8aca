"""An optimizer's step recorded as one write record, from the version counters before and after it.

NOTE [An optimizer step as one write record]
A training loop's in-place writes are mostly its optimizer's: Adam's single-tensor step makes six per
parameter (``exp_avg.lerp_``, ``exp_avg_sq.mul_().addcmul_``, ``param.addcdiv_``, ``step += 1``), all
from torch's own code and all named at the program's ``opt.step()`` line. Past the first ``per_site``
writes at that line each is only counted and put in the write log (NOTE [The write fast path] in
tracker.py), yet the wrapper and the recorder still cost about 10 us a write. So a step of one of
torch's own optimizers is recorded as a whole once its line has used its detailed events:

- the global optimizer step pre-hook (``register_optimizer_step_pre_hook``, torch 2.0 and later) reads
  the version of every tensor the step may write (each parameter, its ``.grad`` and its state tensors)
  and puts the thread in ``IN_STEP``, so the write wrappers call the originals at once;
- the post-hook reads the versions again and logs, for each tensor whose version moved, the writes the
  last step recorded write by write made into it (their ops and library functions, one log entry per
  version bump, as the wrappers would have logged them), and counts them at the line: the write log,
  ``events_summary`` and every check that reads them see what they would have seen.

A step is recorded whole only where nothing could tell the difference: a class of ``torch.optim``'s
own (the program's subclass could run its own code in ``step``), no closure and no other step hook
(either runs the program's code inside the step), not ``differentiable`` (its writes build a graph),
every tensor with a storage of its own and a version counter of its own (not a view), none of them on
a storage that a kept value, shared state or one of explain's saved tensors watches (those writes need
their detail: the step is then recorded write by write). A step that raises never reaches its
post-hook: the next wrapped write on the thread finds that it is not inside the step's frame any more,
and the step's writes so far are logged then (as they are at a backward call and at the end of the
run).
"""

from __future__ import annotations

import sys
import threading
import weakref

import torch
from torch.optim import optimizer as _optimizer

from tensorscope.instrument.frames import _LINES, line_of, user_frame
from tensorscope.instrument.recorder import storage_key as _storage_key
from tensorscope.instrument.records import MAX_LOGGED_STORAGES as _MAX_LOGGED_STORAGES
from tensorscope.instrument.records import MAX_WRITES_PER_STORAGE as _MAX_WRITES_PER_STORAGE

# thread ident -> the step recorded whole that runs on it; read by the write wrappers (patches.py)
IN_STEP: dict = {}
_get_ident = threading.get_ident
_FALLBACK_OP = "step"  # a write no recorded step showed (a state tensor the step made)
_TEMPORARIES = ("temporaries",)  # a template's key: writes per parameter into tensors made in the step
_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_sequence_nr = torch._C._autograd._get_sequence_nr
_is_compiling = getattr(torch.compiler, "is_compiling", None)


class _Step:
    __slots__ = ("rec", "opt", "frame", "uf", "line", "site", "aseq", "entries", "fresh", "before")

    def __init__(self, rec, opt, frame, uf, line, site, aseq, entries, fresh, before):
        self.rec, self.opt, self.frame, self.uf, self.line, self.site = rec, opt, frame, uf, line, site
        self.aseq, self.entries, self.fresh, self.before = aseq, entries, fresh, before


class OptimizerSteps:
    """The optimizer steps of one run (see NOTE [An optimizer step as one write record])."""

    def __init__(self, rec):
        self.rec = rec
        self._learning: dict = {}  # thread ident -> a step recorded write by write, whose writes are learnt
        # optimizer -> {(parameter index, role): [(op, library code), ...]} of its last step recorded write by write
        self.templates = weakref.WeakKeyDictionary()
        self._hooks_ours: dict = {}  # (number of global pre-hooks, of post-hooks) -> all tensorscope's
        self.whole = 0  # steps recorded whole (for the benchmarks)

    # --- the hooks ------------------------------------------------------------------------------------

    def started(self, opt, args, kwargs) -> None:
        """The global step pre-hook: snapshot the versions; record the step whole where nothing needs detail."""
        if _compiling():  # first: nothing here is traceable
            return
        rec = self.rec
        try:
            ident = _get_ident()
            if not rec.active or ident in IN_STEP or not self._eligible(opt, args, kwargs):
                return
            frame = sys._getframe(2)  # torch's profile_hook_step wrapper, the frame the step runs under
            uf = user_frame(frame, rec.user)
            if uf is None:
                return
            code = uf.f_code
            entry = _LINES.get((id(code), uf.f_lasti))
            line = entry[1] if entry is not None and entry[0] is code else line_of(uf)
            site = ("write", code.co_filename, line)
            before = rec.site_counts.get(site, 0)
            whole = before >= rec.per_site or len(rec.events) >= rec.max_events
            snap = self._tensors(opt)
            if snap is None:
                return
            step = _Step(rec, opt, frame, uf, line, site, _sequence_nr(), snap[0], snap[1], before)
            if whole:
                IN_STEP[ident] = step
            else:  # recorded write by write: learn its writes for the steps recorded whole
                self._learning[ident] = step
        except Exception:
            IN_STEP.pop(_get_ident(), None)

    def finished(self, opt, args, kwargs) -> None:
        """The global step post-hook: log the writes of a step recorded whole."""
        if _compiling():
            return
        try:
            ident = _get_ident()
            step = IN_STEP.get(ident)
            if step is not None and step.opt is opt:
                self.close(ident, finished=True)
                return
            step = self._learning.pop(ident, None)
            if step is not None and step.opt is opt:
                self._learn(step)
        except Exception:
            IN_STEP.pop(_get_ident(), None)

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
        self._learning.clear()

    def close(self, ident, finished=False) -> None:
        """Log the writes of the step recorded whole on thread ``ident`` and leave it. The write wrappers call
        this for a step that raised (see ``in_step`` in patches.py)."""
        step = IN_STEP.pop(ident, None)
        if step is None:
            return
        try:
            self._log(step, finished)
        except Exception:
            pass
        step.opt = step.rec = step.frame = step.uf = step.entries = None

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

    def _tensors(self, opt):
        """([(role, tensor, storage key, version)] of every tensor the step may write, [indices of the
        parameters with no state yet]), or None when one of them needs its writes recorded one by one."""
        rec = self.rec
        kept, shared, pending = rec.kept.keys, rec.shared.keys, rec.pending
        state = opt.state
        out = []
        fresh = []
        append = out.append
        i = 0
        for group in opt.param_groups:
            for p in group["params"]:
                i += 1
                roles = [("param", p)]
                g = p.grad
                if g is not None:
                    roles.append(("grad", g))
                s = state.get(p)
                if s:
                    for name, v in s.items():
                        if isinstance(v, _Tensor):
                            roles.append((name, v))
                else:
                    fresh.append(i)
                for name, t in roles:
                    if (type(t) is not _Parameter and type(t) is not _Tensor) or t._is_view():
                        return None
                    key = _storage_key(t)
                    if key in kept or key in shared or pending and key in pending:
                        return None
                    append(((i, name), t, key, t._version))
        return out, fresh

    def _new_state(self, step):
        """State tensors the step made (the first step of a parameter): version 0 before it."""
        out = []
        if not step.fresh:
            return out
        fresh = set(step.fresh)
        state = step.opt.state
        i = 0
        for group in step.opt.param_groups:
            for p in group["params"]:
                i += 1
                if i not in fresh:
                    continue
                for name, v in (state.get(p) or {}).items():
                    if isinstance(v, _Tensor):
                        try:
                            if not v._is_view():
                                out.append(((i, name), v, _storage_key(v), 0))
                        except Exception:
                            continue
        return out

    def _learn(self, step) -> None:
        """After a step recorded write by write: the ops and library functions of each tensor's writes."""
        rec = self.rec
        code = step.uf.f_code
        learnt = {}
        own = 0
        params = set()
        for role, t, key, v0 in step.entries + self._new_state(step):
            v1 = t._version
            if v1 == v0 or key is None:
                continue
            own += v1 - v0
            params.add(role[0])
            ops = [(w[3], w[8]) for w in rec.write_log.get(key, ()) if w[1] >= v0 and w[5] is code and w[7] == step.line]
            if len(ops) == v1 - v0:
                learnt[role] = ops
        # writes into the step's own temporaries (Adam's `denom.add_(eps)`), per parameter updated
        extra = rec.site_counts.get(step.site, 0) - step.before - own
        learnt[_TEMPORARIES] = (extra / len(params)) if params and extra > 0 else 0
        self.templates[step.opt] = learnt

    def _log(self, step, finished) -> None:
        """The write log's entries of a step recorded whole, as the wrappers would have made them (see
        ``Tracker.log_write``, inlined), and its count at the line."""
        rec = self.rec
        uf, line = step.uf, step.line
        code, lasti = uf.f_code, uf.f_lasti
        aseq = step.aseq
        template = self.templates.get(step.opt) or {}
        log = rec.write_log
        n = 0
        params = set()
        entries = step.entries + self._new_state(step) if step.fresh else step.entries
        for role, t, key, v0 in entries:
            v1 = t._version
            if v1 == v0:
                continue
            n += v1 - v0
            params.add(role[0])
            recs = log.get(key)
            if recs is None:  # least recently written storage out first (Tracker.log_write)
                if len(log) >= _MAX_LOGGED_STORAGES:
                    log.popitem(last=False)
                recs = log[key] = []
            else:
                log.move_to_end(key)
            # grad mode off: torch.optim's steps run under no_grad unless differentiable (never whole)
            ops = template.get(role)
            if ops is not None and len(ops) == v1 - v0:
                for op, lib in ops:
                    if len(recs) >= _MAX_WRITES_PER_STORAGE:
                        del recs[0]
                    recs.append((aseq, v0, v0 + 1, op, False, code, lasti, line, lib, None))
                    v0 += 1
            else:  # one entry for them all
                op, lib = ops[-1] if ops else (_FALLBACK_OP, _library_code(step.opt))
                if len(recs) >= _MAX_WRITES_PER_STORAGE:
                    del recs[0]
                recs.append((aseq, v0, v1, op, False, code, lasti, line, lib, None))
        if finished:  # a step that raised: where in it is not known, its temporaries not counted
            n += round(template.get(_TEMPORARIES, 0) * len(params))
        if n:
            counts = rec.site_counts
            before = counts.get(step.site, 0)
            counts[step.site] = before + n
            rec.aggregated += n
            if before < rec.per_site:  # only the event cap made it whole (see Tracker.write_site)
                rec.log_full = True
        self.whole += 1


def in_step(ident, frame) -> bool:
    """Whether a write called from ``frame`` on thread ``ident`` runs inside the optimizer step recorded
    whole there (its wrapper then calls the original at once). A step that raised ran no post-hook: the
    first write after it finds the step's frame gone from its stack, and the step's writes are logged."""
    step = IN_STEP.get(ident)
    if step is None:
        return False
    target = step.frame
    f = frame
    while f is not None:  # torch's steps write about six frames below their wrapper
        if f is target:
            return True
        f = f.f_back
    rec = step.rec
    if rec is not None:
        rec.steps.close(ident)
    return False


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


def _library_code(opt):
    """The code of the optimizer class's own ``step`` (torch wraps it: the innermost function)."""
    fn = getattr(type(opt), "step", None)
    for _ in range(4):
        inner = getattr(fn, "__wrapped__", None)
        if inner is None:
            break
        fn = inner
    return getattr(fn, "__code__", None)
