"""Where the first NaN or Inf came from: cheap checks at the sinks, and (explain) the op that made it.

NOTE [Checking values at the sinks]
A non-finite value matters when it reaches something the program keeps or acts on. ``run``
checks three such places, each with one fused reduction over what is there (the
``isfinite(...).all()`` of a tensor, ``_foreach_norm(..., inf)`` over a list): the loss given to
``backward()``, the gradients of the leaves that backward reached (after it), and the parameters of
an optimizer after its ``step()``. On CPU a check is read at once; on CUDA the flags stay on the
device and are read in batches of ``_DUE`` (and once after the program), so nothing waits for the
GPU at each step. The first sink that failed is the recorded fact.

NOTE [Origin of a non-finite value]
By default ``explain`` (and ``run --check-values``) reads the origin from the graph at a failed sink and
checks each node's gradient in backward (NOTE [Origins from the graph] and NOTE [Checking each node's
gradient] in origin_walk.py): no call per op in the forward pass. The mode below runs only inside
``torch.func`` transforms (which run without explain's saved-tensor hooks, so there is no graph record
to walk), and over the whole run when asked for (``TENSORSCOPE_ORIGIN_MODE=1``): a TorchDispatchMode
that sees every aten op, forward,
backward (the engine's ops pass through dispatch too, with ``_current_autograd_node`` set) and the
optimizer's. An op whose output is non-finite while all its floating inputs are finite is a *birth*
(the op made the value); one whose non-finite input no op under the mode produced
(``torch.from_numpy``, a loaded tensor) is a *data* birth, named at the line that made that input
when tensorscope saw it. Non-finite outputs of an op with a non-finite input *carry* the birth of
that input (a map from storage address to birth, bounded). A sink that fails names the birth its
tensor carries: the origin. Births that never reach a sink (a ``masked_fill(-inf)`` absorbed by a
softmax, a NaN removed by ``nan_to_num`` or ``where``) are never reported: see NOTE [Non-finite
values handled on purpose] in kinds/non_finite_value.py. After the first sink failure the mode stops
checking (it only passes ops through).

NOTE [The cost of the origin mode]
Why it is not the default: on the GPT benchmark the mode alone costs more than anomaly mode, and a
mode that only passes ops through already costs most of that (benchmarks/RESULTS.md, Non-finite
checks). What an op costs under the mode, in order of size: torch's own Python call of
``__torch_dispatch__`` (with its dynamo-disable wrappers; an empty mode alone costs about as much as
anomaly mode on a small CPU model), then the check. The check is one ``sum`` of each floating output
and one read of it (``_finite``: a NaN or Inf anywhere makes the sum non-finite), not
``isfinite(out).all()`` (five kernels and temporaries the size of the output). Left out:
- views (``view``, ``t``, ``transpose``, ``expand``...): their values are their base's, checked
  when the base was made; they share its storage, so they carry its birth;
- integer and bool outputs, ZeroTensors (NOTE [ZeroTensors inside a dispatch mode]);
- ``empty`` and its kin, whose uninitialised memory may hold NaN bit patterns the program never
  reads (a check there would name a false origin), and constant or random fills (``_UNCHECKED``);
- the ops inside ``optimizer.step()`` (a for-loop Adam runs about eight per parameter): the
  parameter sink after the step checks them all in one reduction; a parameter made non-finite from
  finite gradients names the step itself, at its line, with the gradient's statistics;
- the frame walk for the line, done only for an op whose output is non-finite or that tests values.

NOTE [An op that raised on a non-finite input]
A NaN need not reach a sink to stop a program: an op may raise on it (``binary_cross_entropy``'s "all
elements of input should be between 0 and 1" when a 0/0 upstream made its input NaN). When the program
ends on an exception that no test of a value explains, the statement that raised (the innermost frame of
the program's own code in the traceback; the frames are finished, so their locals are read safely) is read
for the names it loads; those holding a floating tensor that is not finite now are what the failing op
read. The error is then taken as a consequence of that value, unless its message is about structure (a
shape, dtype, device or index: kinds/non_finite_value.py), which no value causes. The origin is read from
the graph of those tensors (NOTE [Origins from the graph]), a data tensor in it being named in the
traceback's frames; a tensor with no graph was computed outside autograd, at the last statement that
assigned a name holding it.
"""

from __future__ import annotations

import ast
import linecache
import math
import os
import re
import sys
import threading
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _pop_mode, _push_mode

from tensorscope import compat, source
from tensorscope.instrument import speedups as _speedups
from tensorscope.instrument.failure_graph import accumulated_leaves, leaves_key, same_leaves
from tensorscope.instrument.frames import line_of, user_frame
from tensorscope.instrument.grad_sums import GradSums
from tensorscope.instrument.origin_walk import (MASK_OPS, GradCheck, assigned, assignment, forward_origin,
                                                returned_at, root_line, stats, value_of)
from tensorscope.instrument.quiet import profiling as _profiling
from tensorscope.instrument.quiet import unseen_by_modes as _unseen
from tensorscope.instrument.quiet import quiet_from_modes
from tensorscope.instrument.recorder import _INSPECTABLE, inspectable

_Tensor = torch.Tensor
# Values are read through the C methods of the tensor base class, never through ``torch.Tensor``'s
# attributes, which a program may have replaced with wrappers of its own that count or log the calls
# (tests/programs_cuda/no_sync.py): a check of ours is not the program's read.
_TB = torch._C.TensorBase
_truth = _TB.__bool__
_detach = _TB.detach
_DUE = 32  # CUDA: flags read in one transfer per this many checks
_MAX_BIRTHS = 16
_MAX_OUTSIDE = 4
_MAX_CARRIED = 4096
_MAX_LEAF_WALK = 20_000
_MAX_SITES = 1024  # (backward line, thread) entries of _leaves before the table starts again
_get_ident = threading.get_ident
_DISPATCH_SHIMS = ("eval_frame.py", "_compile.py")
# ops a program calls to test values: a non-finite input here is what the program looked at
_TESTS = frozenset({"isfinite", "isnan", "isinf", "isposinf", "isneginf", "_local_scalar_dense",
                    "_amp_foreach_non_finite_check_and_unscale_", "nan_to_num"})
# ops whose output holds no value computed from another: uninitialised memory (which may hold any bit
# pattern, NaN included, and is written before it is read) or a constant or random fill
_UNCHECKED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
                        "new_zeros", "zero_", "ones", "ones_like", "new_ones", "arange", "linspace", "rand", "randn",
                        "rand_like", "randn_like", "uniform_", "normal_", "bernoulli_", "exponential_"})
# ops whose output is a fresh tensor made from Python or NumPy values: a non-finite value here came with the data
_DATA_OPS = frozenset({"lift_fresh", "lift_fresh_copy", "_to_copy", "tensor", "scalar_tensor", "full", "fill"})


def _floating(t) -> bool:
    """A tensor whose values can be non-finite and can be read here: not a ZeroTensor (see NOTE [ZeroTensors
    inside a dispatch mode])."""
    return (isinstance(t, _Tensor) and (t.is_floating_point() or t.is_complex()) and inspectable(t)
            and not t._is_zerotensor())


def _flat(values, out):
    for v in values:
        if isinstance(v, (list, tuple)):
            _flat(v, out)
        else:
            out.append(v)
    return out


def _key(t):
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return None


class ValueWatch:
    """The run's non-finite facts: sink checks always, origins with ``origins=True`` (see the NOTEs above)."""

    def __init__(self, tracker, origins: bool = False, mode: bool | None = None):
        self.tracker = tracker
        self.origins = origins
        # NOTE [Origins from the graph] by default; the dispatch mode of NOTE [Origin of a non-finite value]
        # only when asked for (TENSORSCOPE_ORIGIN_MODE=1) on a release where it is safe
        if mode is None:
            mode = os.environ.get("TENSORSCOPE_ORIGIN_MODE") == "1"
        self.use_mode = bool(origins and mode)
        self.grads = GradCheck(self) if origins and not self.use_mode else None
        if self.grads is not None:
            self.grads.sums = GradSums(self.grads)  # NOTE [Gradients the engine adds up] in grad_sums.py
        self.births: list[dict] = []
        self.carried: dict[int, int] = {}  # storage address -> index into births
        self.sink: dict | None = None  # the first sink that held a non-finite value
        self.pending_grad: dict | None = None  # non-finite gradients not yet acted on
        self.tested: dict | None = None  # the last test (isnan/isfinite/.item()) of a non-finite value
        self.backward_calls = 0
        self.optimizer_steps = 0
        self.in_step = False
        self.busy = False
        self.done = False
        self.due: list = []  # CUDA: (flag, sink facts)
        self._leaves: dict = {}  # (backward site, thread) -> weak refs to the leaves its graph reached
        # thread -> (site, step, leaf refs): NOTE [Gradients checked where a step reads them]
        self.deferred: dict[int, tuple] = {}
        self._handles: list = []
        self._mode = None
        self._last_backward = None
        self._transform = None  # (mode, len(births) at entry): see enter_transform
        # (weak ref, where it was made): NOTE [A value computed outside autograd, in a frame gone]
        self.outside: list = []
        # the accelerator's read of a step's parameters (NOTE [A step's parameters read in place]), or None
        self._finite_params = getattr(_speedups.compiled(), "finite_params", None) if _to_dlpack else None
        # the accelerator's read of a loss (NOTE [The loss read in place]), or None
        self._finite_scalar = _speedups.function("finite_scalar") if _BASE_READS is not None else None

    # --- switching on and off ---------------------------------------------------

    def install(self):
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self._handles = [register_optimizer_step_pre_hook(self._pre_step),
                         register_optimizer_step_post_hook(self._post_step)]
        return self

    def push_mode(self) -> None:
        """TENSORSCOPE_ORIGIN_MODE=1's dispatch mode, on this thread: torch keeps the dispatch-mode stack per
        thread, so it goes on the main thread, with the saved-tensor hooks, where torch was imported on
        another (instrument.session.active's ``per_thread``; on the importing thread it saw none of the main
        thread's ops and the origin was lost: tests/test_torch_import.py)."""
        if self.use_mode and self._mode is None:
            self._mode = OriginMode(self)
            _push_mode(self._mode)  # pushed directly, as ops.py does (saved.py wraps __enter__)

    def uninstall(self):
        for h in self._handles:
            h.remove()
        self._handles = []
        self._deferred_grads(None, every=True)  # gradients no step read (NOTE [Gradients checked where a step reads them])
        self._grad_birth()
        if self._mode is not None:
            self._mode = None
            try:
                _pop_mode()
            except Exception:
                pass
        self.flush()
        self._hazard()

    def _hazard(self):
        sink = self.sink or self.pending_grad
        if sink is not None:  # a hazard fact naming its kind (kinds/silent_non_finite_value.py explains it)
            self.tracker.add_hazard(("non-finite",), {"kind": "silent-non-finite-value", "what": sink.get("what"),
                                                      "file": sink.get("file"), "line": sink.get("line")})

    def facts(self) -> dict | None:
        """The plain facts of the recording (None when every checked value was finite)."""
        self._grad_birth()  # a backward that raised (anomaly mode's check) after a node made the value
        self.flush()
        self._hazard()
        sink = self.sink
        if sink is None and self.pending_grad is not None:
            sink = self.pending_grad
        if sink is None and not self.births and self.tested is None:
            return None
        origin = None
        if sink is not None and sink.get("birth") is not None:
            origin = self._first(sink["birth"])
        tested = self.tested
        if origin is None and tested is not None and tested.get("birth") is not None:
            origin = self._first(tested["birth"])
        return {"checked": "origins" if self.origins else "sinks",
                "found_by": None if not self.origins else ("dispatch mode" if self.use_mode else "graph"),
                "sink": sink, "origin": origin,
                "tested": tested, "births": list(self.births),
                "backward_calls": self.backward_calls, "optimizer_steps": self.optimizer_steps}

    def _first(self, index: int) -> dict:
        """The birth a sink carries, or the first of its step and phase made earlier and not on purpose: a
        float16 ``exp`` that overflowed to inf and made a later ``log`` see 0 is the origin, not the ``log``."""
        b = self.births[index]
        for earlier in self.births[:index]:
            if earlier["step"] == b["step"] and earlier["phase"] == b["phase"] and not earlier.get("intended"):
                return earlier
        return b

    def note_saved_outside(self, t, frame) -> None:
        """A non-finite tensor with no ``grad_fn`` was saved at ``frame``: read the running frames for the statement
        that computed it (NOTE [A value computed outside autograd, in a frame gone] in origin_walk.py)."""
        if len(self.outside) >= _MAX_OUTSIDE:
            return
        try:
            made = assigned(self.tracker, t, frame=frame) or returned_at(self.tracker, t, frame)
            if made is not None:
                self.outside.append((weakref.ref(t), made))
        except Exception:
            pass

    # --- the sinks ----------------------------------------------------------------

    def step(self) -> int:
        return max(self.backward_calls, self.optimizer_steps)

    def before_backward(self, args, kwargs, frame):
        """The loss given to backward() (or the outputs given to autograd.grad); first, under gradient accumulation,
        the gradients the backward before left (NOTE [Gradients checked where a step reads them])."""
        if self.sink is not None:
            return
        if _get_ident() in self.deferred:  # a second backward before a step: read the first's before this adds to them
            self._deferred_grads(frame)
            if self.sink is not None:
                return
        roots = args[0] if args else kwargs.get("tensors", kwargs.get("outputs"))
        if isinstance(roots, _Tensor):  # the common case (``loss.backward()``) without the two list comprehensions
            read = self._finite_scalar  # NOTE [The loss read in place]: under ``run``, no mode, no profiler
            if (read is not None and self.grads is None and type(roots) is _Tensor
                    and not (_dispatch_modes() or _function_modes() or _profiling())
                    and read(roots, _Tensor, _DTYPE_KINDS, _BASE_READS) is True):
                return  # a finite CPU scalar, or not floating: what ``_floating`` and ``_finite_scalar`` would find
            roots = [roots] if _floating(roots) else []
        else:
            roots = [r for r in (roots or ()) if isinstance(r, _Tensor) and _floating(r)]
        # NOTE [A step's sinks on the CPU, read directly]; under explain (``self.grads``) the loss's value is also
        # the trigger of NOTE [Gradients that may overflow], which ``_check`` hands on: no shortcut there
        if roots and (self.grads is not None or not _finite_scalar(roots)):
            self._check("loss", roots, frame)
        if self.grads is not None:
            self._grad_birth()
            if self.sink is None and not self.done:
                self.busy = True
                try:
                    self.grads.arm(roots)  # NOTE [Checking each node's gradient]
                finally:
                    self.busy = False

    def after_backward(self, args, kwargs, frame):
        self._last_backward = self._grad_birth()
        self.backward_calls += 1
        if self.sink is not None:
            return
        roots = args[0] if args else kwargs.get("tensors")
        roots = [roots] if isinstance(roots, _Tensor) else [r for r in (roots or ()) if isinstance(r, _Tensor)]
        uf = user_frame(frame, self.tracker.user)
        site = (uf.f_code.co_filename, line_of(uf)) if uf is not None else None
        key = leaves_key(site) if site is not None else None  # NOTE [Leaves cached per backward line and thread]
        refs = self._leaves.get(key) if key is not None else None
        if refs is not None and not same_leaves(roots, refs):
            refs = None
        leaves = None
        if refs is None:
            leaves = _leaves_of(roots)
            if key is not None:
                if len(self._leaves) >= _MAX_SITES:
                    self._leaves.clear()
                self._leaves[key] = refs = [weakref.ref(v) for v in leaves]
        if not self.origins and self.optimizer_steps:  # see NOTE [Gradients checked where a step reads them]
            # the leaves themselves are read only where the gradients are (``_deferred_grads``)
            self.deferred[_get_ident()] = (site or (None, None), self.backward_calls - 1,
                                           refs or [weakref.ref(v) for v in leaves])
            return
        if leaves is None:
            leaves = [v for v in (r() for r in refs) if v is not None]
        grads, owners = _grads_of(leaves)
        queued = self.grads.sums.take() if self.grads is not None and self.grads.sums is not None else None
        if grads:
            self._check("grad", grads, frame, owners=owners, queued=queued)

    # NOTE [Gradients checked where a step reads them]
    # A plain run (no origins to find) reads the gradients of a backward call through the parameters of the
    # optimizer step that used them, once a first step has been seen: a NaN or Inf gradient makes the parameters
    # it updates non-finite (SGD, Adam, and a clipping whose total norm is not finite), so finite parameters
    # after the step mean finite gradients, or gradients the step left out on purpose (a loss scaler). A small
    # model's step then pays two checks (the loss, and the parameters), not three. Only when the parameters are
    # not finite are the gradients read, to name the first sink that held the value (the backward line when the
    # gradients were not finite; the step's line when the step made the parameters so). Gradients that no step
    # reads (a backward after the last step) are checked at the end; a step that never runs (a loss scaler
    # skipping it) reads none, as when they were checked at each backward and later ones were finite. With
    # gradient accumulation (a backward while the one before is still unread by a step) the gradients are read
    # before the next backward adds to them: one fused check per micro-batch, none in a program that steps after
    # each backward. So the backward named is the first whose gradients were not finite (an earlier micro-batch's
    # NaN, or the running sum in ``.grad`` that passed the dtype's range), as when every backward is checked.

    def _deferred_grads(self, frame, every=False):
        """The gradients of this thread's last backward call that no check has read yet, checked on their own;
        ``every``: the run is over, those of every thread that has ended too (a live thread's backward may be
        writing its gradients: NOTE [Leaves cached per backward line and thread] in failure_graph.py)."""
        me = _get_ident()
        if every:
            alive = {t.ident for t in threading.enumerate()} - {me}
            idents = [i for i in list(self.deferred) if i not in alive]
        else:
            idents = [me]
        for ident in idents:
            deferred = self.deferred.pop(ident, None)
            if deferred is None or self.sink is not None:
                continue
            site, step, refs = deferred
            grads, owners = _grads_of([v for v in (r() for r in refs) if v is not None])
            if grads:
                self._check("grad", grads, frame, owners=owners, site=site, step=step)

    def _pre_step(self, optimizer, args, kwargs):
        self.in_step = True

    def _post_step(self, optimizer, args, kwargs):
        self.in_step = False
        self.optimizer_steps += 1
        if self.sink is not None:
            return
        if not _function_modes():  # ``_unseen()``'s guard that does nothing, not entered (two Python calls a step)
            return self._post_step_checks(optimizer, sys._getframe(1))
        with _unseen():  # NOTE [Our reads unseen by the program's torch-function modes] in quiet.py
            return self._post_step_checks(optimizer, sys._getframe(1))

    def _post_step_checks(self, optimizer, frame):
        ident = _get_ident()
        read = self._finite_params  # NOTE [A step's parameters read in place]
        if read is not None and not (_dispatch_modes() or _function_modes() or _profiling()):
            grad_mode = _is_grad_enabled()
            if grad_mode:  # no autograd node for ``_to_dlpack``'s view (see the NOTE: torch 2.2 makes one)
                _set_grad_enabled(False)
            try:
                n = read(optimizer.param_groups, _INSPECTABLE, _to_dlpack)
            except Exception:
                n = None
            finally:
                if grad_mode:
                    _set_grad_enabled(True)
            if n is not None and n is not False:  # n floating parameters, all on the CPU and finite
                if ident in self.deferred:  # as below: the gradients the step read were finite
                    del self.deferred[ident]
                    self.pending_grad = None
                elif n:  # as ``_check`` does with a finite check
                    self.pending_grad = None
                return
        params = _floating_params(optimizer)
        if ident in self.deferred:
            # parameters that a step left finite were updated from finite gradients, or the step left the others
            # out (as a loss scaler does): only when they are not finite are the gradients read, to name the sink.
            # On a GPU the flags wait to be read in batches: the two checks as before, nothing read now.
            if _finite_on_cpu(params):  # NOTE [A step's sinks on the CPU, read directly]
                del self.deferred[ident]
                self.pending_grad = None
                return
            self._deferred_grads(frame)
        if params:
            self._check("parameter", params, frame, optimizer=type(optimizer).__name__)

    def _check(self, what, tensors, frame, owners=None, optimizer=None, site=None, step=None, queued=None):
        tr = self.tracker
        tr.pause()  # NOTE [Pausing the recorder] in tracker.py
        self.busy = True
        try:
            guard = quiet_from_modes(tensors)  # the program's mode (around its backward) must not see our check
            peak = [] if what == "grad" and self.grads is not None else None
            loss = tensors[0] if what == "loss" and self.grads is not None and len(tensors) == 1 else None
            if loss is not None and loss.is_cpu and loss.numel() == 1:
                with guard:
                    v = _TB.item(loss)  # the one read the check takes anyway (_all_finite's scalar case)
                flag = v - v == 0
                if flag:
                    try:
                        self.grads.note_loss(v, loss.dtype)  # NOTE [Gradients that may overflow]
                    except Exception:
                        pass
            else:
                with guard:
                    flag = _all_finite(tensors, peak)
            if peak:  # NOTE [Gradients that may overflow]
                self.grads.note_peak(max(peak))
            now = isinstance(flag, bool) or flag.device.type == "cpu" or flag.device.type == "meta" \
                or (what == "loss" and self.grads is not None)
            if now:
                if isinstance(flag, bool):
                    ok = flag
                else:
                    with guard:
                        ok = _truth(flag)
                if ok:  # the common case: no facts to build (what _settle does with a finite check)
                    if what != "loss":  # finite gradients, or a step that left the parameters finite
                        self.pending_grad = None
                    return
            if step is None:
                step = {"loss": self.backward_calls, "grad": self.backward_calls - 1}.get(what, self.optimizer_steps - 1)
            if site is None:
                uf = user_frame(frame, tr.user)
                site = (uf.f_code.co_filename, line_of(uf)) if uf is not None else (None, None)
            facts = {"what": what, "file": site[0], "line": site[1], "step": step}
            if optimizer:
                facts["optimizer"] = optimizer
            if queued:
                facts["queued"] = queued  # NOTE [Sums checked on a GPU]: read only if this check fails
            held = [weakref.ref(t) for t in tensors]
            own = [weakref.ref(o) for o in owners] if owners else None
            # the loss's flag is read at once where origins are read from its graph (NOTE [Origins from the
            # graph]): the graph is gone by the time a batch of flags is read (one read per backward on CUDA)
            if now:
                if self.due:  # CUDA: the checks before this one, still on the device, are settled first, in order
                    self.flush()
                self._settle(False, facts, held, own)
            else:
                self.due.append((flag, facts, held, own))
                if len(self.due) >= _DUE:
                    self.flush()
        except Exception:
            pass
        finally:
            self.busy = False
            tr.resume()

    def flush(self):
        """Read the CUDA flags waiting (one transfer), in order."""
        due, self.due = self.due, []
        if not due:
            return
        try:
            flags = [f for f, *_ in due]
            with quiet_from_modes(flags):  # as _check's: the program's modes do not see this read
                values = _TB.tolist(torch.stack([_TB.to(f, "cpu", non_blocking=False) for f in flags]))
        except Exception:
            return
        for ok, (_, facts, held, own) in zip(values, due):
            self._settle(ok, facts, held, own)

    def _settle(self, ok, facts, held, owners):
        queued = facts.pop("queued", None)  # NOTE [Sums checked on a GPU]: never part of the facts reported
        if facts["what"] == "grad":
            if ok:
                self.pending_grad = None  # the program recovered: later gradients are finite
                return
            if self.pending_grad is not None:
                return
        if ok or self.sink is not None:
            if ok and facts["what"] == "parameter":
                self.pending_grad = None  # the step left the parameters finite: the gradients were handled
            return
        tensors = [r() for r in held]
        bad = next((i for i, t in enumerate(tensors) if t is not None and not _truth(torch.isfinite(t).all())), None)
        if bad is not None:
            t = tensors[bad]
            facts["value"] = value_of(t)
            facts["tensor"] = self.tracker.tid(owners[bad]() if owners and owners[bad]() is not None else t)
            facts["count"] = len(tensors)
            facts["index"] = bad
            if self.use_mode or not self.origins:
                b = self.carried.get(_key(t))
            elif facts["what"] == "loss":
                b = self._transform_birth()
                if b is None:
                    b = self._walk_birth([t], facts["step"], sink=facts)
            elif facts["what"] == "grad":
                b = self._last_backward if not queued else self._queued_birth(queued)
            else:
                b = None
            if b is None and facts["what"] == "parameter" and self.origins:
                if self.pending_grad is not None:  # the step applied non-finite gradients
                    b = self.pending_grad.get("birth")
                elif len(self.births) < _MAX_BIRTHS:
                    b = self._step_birth(facts, t)
            facts["birth"] = b
            if b is None and self.births and self.use_mode:
                facts["birth"] = 0  # carried through something the map missed: the first birth is the best guess
        if facts["what"] == "grad":
            self.pending_grad = facts
        elif facts["what"] == "parameter" and self.pending_grad is not None:
            # the step applied the non-finite gradients: the first sink that held them is the gradients', at the
            # backward line (under explain the culprit is the origin, with this sink beside it)
            self.sink = self.pending_grad
        else:
            self.sink = facts
            if self.origins:
                self.done = True  # NOTE [Origin of a non-finite value]: stop checking deep

    def _queued_birth(self, queued) -> int | None:
        """A failed gradient check's sums queued on the device, read now (NOTE [Sums checked on a GPU])."""
        if len(self.births) >= _MAX_BIRTHS or self.grads is None or self.grads.sums is None:
            return None
        b = self.grads.sums.read_queued(queued)
        if b is None:
            return None
        self.births.append(b)
        return len(self.births) - 1

    def _grad_birth(self) -> int | None:
        """Take the birth the last backward's node hooks found (and take the hooks off): its index in births."""
        g = self.grads
        if g is None:
            return None
        g.disarm()
        b, g.birth = g.birth, None
        if b is None or len(self.births) >= _MAX_BIRTHS:
            return None
        self.births.append(b)
        return len(self.births) - 1

    def enter_transform(self) -> bool:
        """A ``torch.func`` transform starts, with explain's saved-tensor hooks stepped aside (saved.py): no
        pack records for a graph walk there, so the origin mode checks the transform's ops (torch 2.11 and
        later; NOTE [The origin mode crashes torch before 2.11]). Its cost is paid inside transforms only."""
        if self.use_mode or self.grads is None or self.done or self._transform is not None \
                or not compat.DISPATCH_MODE_OVER_BACKWARD_SAFE:
            return False
        mode = OriginMode(self)
        _push_mode(mode)
        self._transform = (mode, len(self.births))
        return True

    def exit_transform(self) -> None:
        if self._transform is not None:
            self._transform = None
            try:
                _pop_mode()
            except Exception:
                pass

    def _transform_birth(self) -> int | None:
        """Inside a transform: the first birth its mode saw (the loss is a functorch wrapper the map misses)."""
        if self._transform is None or len(self.births) <= self._transform[1]:
            return None
        return self._transform[1]

    def _walk_birth(self, roots, step, scopes=None, sink=None) -> int | None:
        """The forward origin read from the graph of ``roots`` (NOTE [Origins from the graph]); for the loss given
        to backward (``sink``), a root node that saved nothing is named at the statement that made the loss."""
        if len(self.births) >= _MAX_BIRTHS:
            return None
        tr = self.tracker
        tr.pause()  # NOTE [Pausing the recorder] in tracker.py
        self.busy = True
        try:
            with torch.no_grad():
                b = forward_origin(tr, roots, step, scopes)
        except Exception:
            b = None
        finally:
            self.busy = False
            tr.resume()
        if b is None:
            return None
        if b.get("line") is None and sink is not None and not b.get("data"):
            try:
                root = roots[0].grad_fn._sequence_nr()
            except Exception:
                root = None
            if root is not None and b.get("seq") == root:
                where = root_line(sink.get("file"), sink.get("line"), (b.get("op") or "").split(".")[-1])
                if where is not None:
                    b["file"], b["line"] = where
        self.births.append(b)
        return len(self.births) - 1

    def at_exit(self, exc) -> None:
        """The program raised: a non-finite tensor it had just tested (named with a test, ``isnan``,
        ``isfinite``, ``.item()``, ``assert``..., on the raising line or the three before it, in a frame of its
        own code) is what it raised on; its origin is read from its graph (``origins``: explain, --check-values;
        a plain run names the test's line and leaves the origin to explain)."""
        if self.use_mode or exc is None or self.tested is not None or self.sink is not None:
            return
        frames = _program_tb(exc, self.tracker.user)
        for frame, lineno in reversed(frames):
            file = frame.f_code.co_filename
            near = [(n, linecache.getline(file, n)) for n in range(lineno, max(0, lineno - 4), -1)]
            try:
                scope = dict(frame.f_locals)
            except Exception:
                continue
            for name, v in scope.items():
                if not (isinstance(v, _Tensor) and v.grad_fn is not None and _floating(v)):
                    continue
                word = re.compile(rf"\b{re.escape(name)}\b")
                # a line that names the tensor and tests it (isnan, isfinite, .item(), assert ...)
                at = next(((n, text) for n, text in near if word.search(text) and _TEST_WORD.search(text)), None)
                if at is None or _finite_now(v):
                    continue
                test = _TEST_WORD.search(at[1])
                self.tested = {"op": test.group(0) if test else None, "file": file, "line": at[0],
                               "birth": self._walk_birth([v], self.backward_calls) if self.origins else None,
                               "step": self.step()}
                return
        self._raised_on(frames)

    def _raised_on(self, frames) -> None:
        """The tensors the raising statement read that are not finite, and their origin (NOTE [An op that
        raised on a non-finite input])."""
        if not frames:
            return
        frame, lineno = frames[-1]
        stmt = source.statement_at(frame.f_code.co_filename, lineno)
        if stmt is None or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        scopes = []
        for f, n in reversed(frames):
            try:
                scopes.append((f.f_code.co_filename, n, dict(f.f_locals)))
            except Exception:
                continue
        if not scopes or scopes[0][0] != frame.f_code.co_filename:
            return
        scope = scopes[0][2]
        bad = []
        for name in source.reads(stmt):
            v = scope.get(name)
            if isinstance(v, _Tensor) and _floating(v) and v.numel() and not _finite_now(v):
                bad.append((name, v))
        if not bad:
            return
        call = next((n for n in ast.walk(stmt) if isinstance(n, ast.Call)), None)
        roots = [v for _, v in bad if v.grad_fn is not None]
        birth = self._walk_birth(roots, self.backward_calls, scopes) if roots and self.origins else None
        if birth is None and self.origins:
            birth = self._computed_birth(scopes, bad[0])
        self.tested = {"op": (source.dotted(call.func).split(".")[-1] or None) if call is not None else None,
                       "file": frame.f_code.co_filename, "line": lineno, "birth": birth, "step": self.step(),
                       "raised_on": [name for name, _ in bad]}

    def _computed_birth(self, scopes, named) -> int | None:
        """A non-finite tensor read by the raising statement with no graph: the program computed it outside
        autograd, at the last statement that assigned a name holding it before that frame's line (its outermost
        op named), innermost frame first."""
        if len(self.births) >= _MAX_BIRTHS:
            return None
        _, t = named
        made = next((m for m in (assignment(file, n, line) for file, line, scope in scopes
                                 for n, v in scope.items() if v is t) if m is not None), None)
        if made is None:
            return None
        self.births.append({"op": f"aten.{made['op']}" if made.get("op") else None, "aten": None, "node": None,
                            "phase": "forward", "file": made["file"], "line": made["line"], "step": self.backward_calls,
                            "tensor": self.tracker.tid(t), "value": value_of(t),
                            "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "inputs": [],
                            "data": False, "intended": False, "found_by": "graph"})
        return len(self.births) - 1

    def _step_birth(self, facts, param) -> int:
        """A parameter the optimizer's step made non-finite from finite gradients (the ops of a step are not
        checked one by one: NOTE [The cost of the origin mode]): the step is the birth, at its line."""
        grad = param.grad if isinstance(param, _Tensor) else None
        inputs = []
        if grad is not None and _floating(grad):
            s = stats(grad)
            s["tensor"] = self.tracker.tid(grad)
            inputs.append(s)
        self.births.append({"op": f"{facts.get('optimizer') or 'optimizer'}.step", "aten": None, "node": None,
                            "phase": "optimizer", "optimizer": facts.get("optimizer"), "file": facts.get("file"),
                            "line": facts.get("line"), "step": facts.get("step"), "tensor": facts.get("tensor"),
                            "value": facts.get("value"), "dtype": str(param.dtype).replace("torch.", ""),
                            "shape": list(param.shape), "inputs": inputs, "data": False, "intended": False})
        return len(self.births) - 1

    # --- the origin mode -------------------------------------------------------------

    def on_op(self, func, args, kwargs, out):
        """One op's outputs (see NOTE [The cost of the origin mode]); ``sys._getframe(2)`` is where
        ``__torch_dispatch__`` was called from, read only when something is non-finite or tested."""
        info = _OPS.get(func)
        if info is None:
            info = _OPS[func] = _op_info(func)
        name, mutable, test, skip = info
        if skip or self.in_step:  # NOTE [The cost of the origin mode]
            if mutable and self.carried and isinstance(out, _Tensor):
                self.carried.pop(_key(out), None)  # overwritten (zero_, a fill, the optimizer's update)
            return
        if type(out) is _Tensor or isinstance(out, _Tensor):
            outs = [out] if _floating(out) else []
        else:
            outs = [o for o in _flat([out], []) if _floating(o)] if out is not None else []
        if not outs and mutable:  # a _foreach_*_ op returns nothing: check what it wrote
            outs = [t for t in _written(func, args, kwargs) if _floating(t)]
        if test:
            self._on_test(name, args, _program_frame(sys._getframe(2)))
        for o in outs:
            if o.numel() == 0 or o.device.type == "meta":
                continue
            if _finite(o):
                if mutable and self.carried:
                    self.carried.pop(_key(o), None)  # written in place with finite values again
                continue
            self._non_finite(name, func, args, kwargs, o, _program_frame(sys._getframe(2)))
            break

    def _on_test(self, name, args, frame):
        for t in _flat(list(args), []):
            if _floating(t) and t.numel() and not _finite(t):
                uf = user_frame(frame, self.tracker.user)
                self.tested = {"op": name, "file": uf.f_code.co_filename if uf else None,
                               "line": line_of(uf) if uf else None, "birth": self.carried.get(_key(t)),
                               "step": self.step()}
                return

    def _non_finite(self, name, func, args, kwargs, o, frame):
        inputs = [t for t in _flat(list(args) + list(kwargs.values()), []) if _floating(t) and t is not o]
        carried = outside = None
        for t in inputs:
            b = self.carried.get(_key(t))
            if b is not None:
                carried = b
                break
        remade = (carried is not None and self.births[carried].get("intended")
                  and self.births[carried]["value"] != "nan" and value_of(o) == "nan")
        if carried is not None and self.births[carried]["phase"] == "forward" \
                and torch._C._current_autograd_node() is not None:
            # a forward value the loss never saw (a `where` dropped it) entering a gradient through a
            # saved tensor: the gradient became non-finite here, in backward
            carried = None
        elif remade:
            carried = None  # a NaN made from a mask's -inf (an all-masked softmax row): a birth of its own
        elif carried is None:
            for t in inputs:
                if t.numel() and not _finite(t):
                    outside = t  # non-finite, and no op under the mode made it: it came with the data
                    break
        if carried is None:
            if len(self.births) >= _MAX_BIRTHS:
                return
            carried = len(self.births)
            self.births.append(self._birth(name, func, inputs, o, frame, outside))
        if len(self.carried) >= _MAX_CARRIED:
            self.carried.clear()
        k = _key(o)
        if k is not None:
            self.carried[k] = carried

    def _birth(self, name, func, inputs, o, frame, outside) -> dict:
        tr = self.tracker
        node = torch._C._current_autograd_node()
        uf = user_frame(frame, tr.user)
        b = {"op": f"aten.{name}", "aten": str(func), "node": None, "phase": "forward",
             "file": uf.f_code.co_filename if uf else None, "line": line_of(uf) if uf else None,
             "step": self.optimizer_steps if self.in_step else self.backward_calls, "tensor": tr.tid(o), "value": value_of(o), "dtype": str(o.dtype).replace("torch.", ""),
             "shape": list(o.shape), "inputs": [], "data": False,
             "intended": name in MASK_OPS and outside is None}
        if node is not None:
            b["phase"] = "backward"
            b["node"] = node.name()
            try:
                ffile, fline = tr.node_line(node._sequence_nr())
            except Exception:
                ffile = fline = None
            b["forward_file"], b["forward_line"] = ffile, fline
            cur = tr.backward_calls.current or {}
            b["backward_file"], b["backward_line"] = cur.get("file"), cur.get("line")
            if isinstance(node, torch.autograd.function.BackwardCFunction) and uf is not None:
                b["custom_function"] = True  # a Python backward of the program's own: its line
            else:  # a built-in node: the forward line that built it, else the backward() line
                b["file"], b["line"] = (ffile, fline) if fline else (cur.get("file"), cur.get("line"))
        elif self.in_step:
            b["phase"] = "optimizer"
        for t in inputs[:8]:
            s = stats(t)
            s["tensor"] = tr.tid(t)
            b["inputs"].append(s)
        if outside is not None:
            tid = tr.tid(outside)
            b["data"] = True
            b["data_tensor"] = tid
            made = tr.tensor_created.get(tid)
            if made:
                b["data_file"], b["data_line"], b["data_how"] = made.get("file"), made.get("line"), made.get("how")
        elif not inputs and name in _DATA_OPS:
            b["data"] = True  # made from Python/NumPy values that already held it
        return b


# NOTE [ZeroTensors inside a dispatch mode]
# Forward AD (``torch.func.jvp``, ``jacfwd``, so ``hessian``) makes tangents with
# ``aten._efficientzerotensor``: a tensor of zeros with no data (its storage's pointer is null),
# whose ops the ZeroTensor dispatch key answers without reading it. A dispatch mode runs below that
# key, with ZeroTensor (and Conjugate, Negative) in the thread's exclude set
# (``torch._C._dispatch_tls_local_exclude_set()``), so an ``isfinite`` issued from
# ``__torch_dispatch__`` on such a tensor goes straight to the CPU kernel, which reads address 0:
# SIGSEGV (torch 2.13, ``hessian`` of any function). A ZeroTensor holds zeros, so ``_floating``
# leaves it out everywhere. functorch's own wrappers are not the danger: below the Python key every
# tensor a mode sees is already unwrapped (``peek_interpreter_stack()`` is None there), so values
# made inside a transform are checked like any other.


class OriginMode(TorchDispatchMode):
    """The dispatch mode of NOTE [Origin of a non-finite value]."""

    def __init__(self, watch: ValueWatch):
        super().__init__()
        self.watch = watch

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        w = self.watch
        if w.done or w.busy or not w.tracker.active:
            return out
        try:
            w.on_op(func, args, kwargs, out)
        except Exception:
            pass
        return out


def _program_tb(exc, user) -> list:
    """The frames of the program's own code in the traceback of ``exc``, outermost first, with their lines."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in user:
            frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return frames


_TEST_WORD = re.compile(r"\b(isnan|isfinite|isinf|isposinf|isneginf|item|nan_to_num|assert)\b")


def _finite_now(t) -> bool:
    try:
        return _truth(torch.isfinite(t.detach()).all())
    except Exception:
        return True


_OPS: dict = {}  # OpOverload -> (name, mutable, a test of values, not checked: a view or _UNCHECKED)


def _op_info(func) -> tuple:
    name = func.overloadpacket.__name__
    schema = func._schema
    view = not schema.is_mutable and any(r.alias_info is not None and not r.alias_info.is_write
                                         for r in schema.returns)
    return name, schema.is_mutable, name in _TESTS, view or name in _UNCHECKED


def _program_frame(f):
    """The frame that called the op, past torch's wrappers of ``__torch_dispatch__``."""
    while f is not None and f.f_code.co_filename.endswith(_DISPATCH_SHIMS):
        f = f.f_back
    return f


def _finite(t) -> bool:
    """Whether every value of ``t`` is finite: one ``sum`` and one read of it.

    A NaN or an infinity anywhere makes the sum NaN or infinite, so a finite sum proves the tensor
    finite with one kernel and no temporary of the tensor's size (``isfinite(t).all()`` on a float
    tensor is five: ``abs``, ``ne``, ``eq``, ``mul``, ``all``, with temporaries of its size). A sum
    that overflowed (float16 values near 65504) is settled by ``isfinite``.
    """
    v = _TB.item(t.sum())
    if v - v == 0:  # False for nan and +-inf, real or complex
        return True
    return _truth(torch.isfinite(t).all())


def _written(func, args, kwargs):
    out = []
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            value = kwargs.get(arg.name) if arg.kwarg_only else (args[i] if i < len(args) else kwargs.get(arg.name))
            _flat([value], out)
    return [t for t in out if isinstance(t, _Tensor)]


def _all_finite(tensors, peak=None):
    """One fused reduction per device: True when every value of every tensor is finite (a 0-dim bool tensor, or a
    Python bool when every tensor is on the CPU and no ``peak`` is asked for).
    With ``peak`` (a list), how close the largest 2-norm of the CPU tensors is to their dtype's largest value
    (``_relative_peak``) is appended to it (NOTE [Gradients that may overflow]), from the norms the check takes
    anyway."""
    if peak is None and all(t.is_cpu for t in tensors):
        # the common case, read at once: a Python bool from the fewest ops (a run's sinks: a small model's step
        # pays them twice, so each op counts); see NOTE [Summing many small tensors at once]
        if len(tensors) == 1 and tensors[0].numel() == 1:  # a scalar loss: its one value, read directly
            try:
                v = _TB.item(tensors[0])
                return v - v == 0
            except Exception:
                pass
        try:
            if _sums_finite(tensors):
                return True
        except Exception:
            pass
        group = [_detach(t) for t in tensors]
        return _truth(_all_finite(group, []))  # a sum that overflowed, or no sum: the exact check settles it
    by_device: dict = {}
    for t in tensors:
        by_device.setdefault(t.device, []).append(_detach(t))  # torch's own method: no wrapper of ours to enter
    flags = []
    for group in by_device.values():
        if len(group) == 1 and (peak is None or group[0].device.type != "cpu"):
            flags.append(torch.isfinite(group[0]).all())
        else:
            if group[0].device.type == "cpu":
                # the 2-norms first: about 5x cheaper than the max-norms on the CPU (4.6 ms for a small GPT's 52
                # gradients, at each sink); a NaN or Inf makes its norm non-finite, and so does a finite value
                # whose square overflows, which the exact check below then settles
                try:
                    norms = torch.stack(torch._foreach_norm(group, 2))
                    if peak is not None:
                        peak.append(_relative_peak(norms, group))
                    flag = torch.isfinite(norms).all()
                    if _truth(flag):
                        flags.append(flag)
                        continue
                except Exception:
                    pass
            try:
                norms = torch._foreach_norm([g if not g.is_complex() else torch.view_as_real(g) for g in group],
                                            float("inf"))
                flags.append(torch.isfinite(torch.stack([n.float() for n in norms])).all())
            except Exception:
                flags.append(torch.stack([torch.isfinite(g).all() for g in group]).all())
    if len(flags) == 1:
        return flags[0]
    return torch.stack([_TB.cpu(f) for f in flags]).all()


# NOTE [Summing many small tensors at once]
# A finite sum proves every value finite (a NaN or an infinity makes it NaN or infinite; a sum that overflowed
# is settled by the exact check). A model's parameters or gradients are many small tensors, and on the CPU each
# reduction costs more in its call than in its arithmetic: a small GPT's 52 parameters (208,256 values) took
# about 112 us as ``_foreach_norm`` (one norm each), 16 us as one sum over the same number of values. So tensors
# under ``_FLAT_BELOW`` values are copied into one flat tensor (``flatten_dense_tensors``, one C call) of at most
# ``_FLAT_CHUNK`` values and summed at once; larger ones are summed each on their own (no copy: the call is
# cheap beside their arithmetic, and the copy is bounded at 4 MB of float32). No autograd graph is built (grad
# mode off, in C) and no wrapper is entered (C functions and TensorBase's methods only).
_FLAT_BELOW = 1 << 16
_FLAT_CHUNK = 1 << 20
_flatten = torch._C._nn.flatten_dense_tensors
_set_grad_enabled = torch._C._set_grad_enabled
_is_grad_enabled = torch._C.is_grad_enabled
_sum = _TB.sum


def _sums_finite(tensors) -> bool:
    """Whether the sums of ``tensors`` (CPU tensors) are all finite: see NOTE [Summing many small tensors at once]."""
    prev = _is_grad_enabled()
    _set_grad_enabled(False)
    try:
        sums, small, n = [], [], 0
        for t in tensors:
            k = t.numel()
            if k >= _FLAT_BELOW:
                sums.append(_sum(t))
                continue
            small.append(t)
            n += k
            if n >= _FLAT_CHUNK:
                sums.append(_sum(_flatten(small)))
                small, n = [], 0
        if small:
            sums.append(_sum(_flatten(small)) if len(small) > 1 else _sum(small[0]))
    finally:
        _set_grad_enabled(prev)
    for s in sums:
        v = _TB.item(s)
        if v - v != 0:  # nan or +-inf, real or complex
            return False
    return True


# NOTE [A step's sinks on the CPU, read directly]
# A training step on the CPU pays two sink checks (NOTE [Gradients checked where a step reads them]): the loss
# before its backward and the parameters after the optimizer step. When they are finite, as they are at nearly
# every step, nothing is recorded: the check is one read. So where no dispatch or torch-function mode is on
# (no program mode could see the read: ``quiet_from_modes`` would give no guard) and the tensors are plain CPU
# tensors, the read is made at once, with TensorBase's own methods (no wrapper of ours is entered, so the
# recorder need not be paused): the loss's one value (``item``; not under explain, whose loss check also feeds
# NOTE [Gradients that may overflow] with that value), the parameters' sums (``_sums_finite``). Only
# when a value is not finite, or the read cannot be made so, does the check go ``_check``'s way, which reads
# the same values again and records the sink. The parameters to check are the optimizer's floating ones,
# ``_floating`` read in place for the tensor types already known (``_INSPECTABLE``): a small model's step
# (4 parameters) and a GPT's (52) call no Python function per parameter.

# NOTE [A step's parameters read in place]
# With the accelerator built (NOTE [The compiled lane] in speedups.py), the parameters' check after a step that
# reads the gradients of a backward (the common case above) is one C call, ``_speedups.finite_params``: no torch
# op is dispatched. For each parameter of each group it calls ``torch._C._to_dlpack``, which gives the tensor's
# data pointer, device, dtype, shape and strides in DLPack's C structure (a stable ABI, legacy capsule named
# "dltensor" on every release from 2.2) and keeps the storage alive until the capsule is released; the values are
# read there, with the GIL held, and a value is not finite when its exponent bits are all set (binary16, bfloat16,
# binary32, binary64; each part of a complex). That is the exact check, so a finite sum that overflows raises no
# doubt, and it reads what the program's values are: a conjugate or negative view's bits differ from its values
# by a sign only. ``_floating_params``' walk is the same walk in C: a parameter of a type ``_INSPECTABLE`` does
# not know to be plain, a group that is not a dict with a list, another device, a dtype other than those and the
# integer ones (float8...), a tensor with no data (sparse, meta, a ZeroTensor) or ``_to_dlpack`` raising give
# "cannot say" (None), and the Python check below runs as before; so does a non-finite parameter (False), which
# ``_check`` records. No program tensor is written or kept (the capsule's reference goes when it is released: its
# destructor calls torch's deleter). Only where no dispatch or torch-function mode and no profiler is on, as for
# the direct reads above: the C call is no op, but ``_to_dlpack`` may make a strided view of a tensor whose
# size-1 dimensions' strides it normalises. That view is made with grad mode off: on torch 2.2.2, with it on, each
# ``_to_dlpack`` of a parameter that requires grad made an autograd node, so the program's next ``grad_fn``'s
# ``_sequence_nr()`` moved by one a parameter a step (seen by test_speedups on 3.10 x 2.2.2, not on 2.13). Measured (callgrind, benchmarks/param_check_cost.py and
# step_instructions.py; benchmarks/RESULTS.md, "speedn19"): small_mlp's ``_post_step`` 75.8k -> 20.9k instructions
# a step; one check of 4, 52 and 5,000 parameters 66k / 1.35M / 43.3M -> 16.7k / 0.50M / 12.7M, about what
# ``_to_dlpack`` alone costs (12k / 0.13M / 12.2M) plus the values' scan.
_to_dlpack = getattr(torch._C, "_to_dlpack", None)  # on every release of the matrix; guarded all the same
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._len_torch_function_stack
_is_fp = _TB.is_floating_point
_is_cplx = _TB.is_complex
_is_zero = _TB._is_zerotensor


def _floating_params(optimizer) -> list:
    """The parameters of ``optimizer`` that ``_floating`` accepts, in order."""
    out = []
    known = _INSPECTABLE
    for g in optimizer.param_groups:
        for p in g["params"]:
            if known.get(type(p)) is True:
                if (_is_fp(p) or _is_cplx(p)) and not _is_zero(p):
                    out.append(p)
            elif _floating(p):
                out.append(p)
    return out


# NOTE [The loss read in place]
# (speedv20) Under ``run`` the loss's check before its backward (NOTE [A step's sinks on the CPU, read directly]) was
# ``_floating`` (three of TensorBase's methods and ``inspectable``) and ``_finite_scalar`` (the modes' and profiler's
# tests, ``is_cpu``, ``numel``, ``item``): about 11.6k instructions a small_mlp step in ``before_backward``, of
# which ``item``'s dispatch to ``_local_scalar_dense`` 1.6k and the Python frames most of the rest. Where the
# accelerator is built, a loss of exactly ``torch.Tensor`` (always inspectable), with no dispatch or torch-function
# mode and no profiler on (no program code can see a read then), is first read by ``_speedups.finite_scalar``: its
# dtype through TensorBase's own getter (an integer or bool dtype: not floating, nothing checked, as ``_floating``
# finds), then ``is_cpu``, ``numel() == 1`` and ``data_ptr()``, TensorBase's own too (a program may replace
# ``torch.Tensor``'s), and the element's exponent bits tested at that address as ``finite_params`` tests a
# parameter's (float16, bfloat16, float32, float64 and their complex kinds). No op is dispatched and no autograd node
# is made (``data_ptr`` is no view). It answers True only where the Python check would find nothing to record; any
# other case (another type, a dtype it does not know such as float8, another device, more than one element, no
# data pointer, a ZeroTensor's null one, a value not finite, a read that raises) answers None and the Python check
# runs as before, reading the value again. Under ``explain`` the loss's value is also the trigger of NOTE
# [Gradients that may overflow]: not read here. The four are ``TensorBase``'s own (in its ``__dict__``) on 2.2.2, 2.6.0,
# 2.9.1, 2.13.0 and 2.15.0 (checked); a release without one of them gives the Python check alone. Measured
# (``benchmarks/step_instructions.py full 50``): ``before_backward`` 11.6k -> 5.6k instructions a small_mlp step,
# the backward phase 511.0k -> 505.2k (benchmarks/RESULTS.md, "speedv20").
_BASE_READS = None
try:
    _BASE_READS = (_TB.__dict__["dtype"], _TB.__dict__["is_cpu"], _TB.__dict__["numel"], _TB.__dict__["data_ptr"])
except Exception:  # a release without one of them as TensorBase's own: the Python check alone
    pass
_DTYPE_KINDS = {torch.float16: 1, torch.bfloat16: 2, torch.float32: 3, torch.float64: 4, torch.complex64: 5,
                torch.complex128: 6}
_DTYPE_KINDS.update({d: 0 for d in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)})


def _finite_scalar(roots) -> bool:
    """Whether ``roots`` is one plain CPU scalar whose value is finite, read directly (see the NOTE above);
    False when it is not, or when it cannot be read so (``_check`` then decides)."""
    if len(roots) != 1 or _dispatch_modes() or _function_modes() or _profiling():
        return False  # a profiler on: ``_check``'s guard keeps the read out of it
    t = roots[0]
    if type(t) is not _Tensor or not t.is_cpu or t.numel() != 1:
        return False
    try:
        v = _TB.item(t)
    except Exception:
        return False
    return v - v == 0  # False for nan and +-inf, real or complex


def _finite_on_cpu(params) -> bool:
    """``all(t.is_cpu for t in params) and _all_finite_now(params)``, with the read made directly where no mode
    is on (see the NOTE above)."""
    for t in params:
        if not t.is_cpu:
            return False
    if not params:
        return True
    if not (_dispatch_modes() or _function_modes() or _profiling()):
        try:
            if _sums_finite(params):
                return True
        except Exception:
            pass
    return _all_finite_now(params)


def _grads_of(leaves) -> tuple[list, list]:
    """The floating gradients of ``leaves`` and the leaves that hold them."""
    grads, owners = [], []
    for v in leaves:
        g = v.grad
        if g is not None and _floating(g):
            grads.append(g)
            owners.append(v)
    return grads, owners


def _all_finite_now(tensors) -> bool:
    """``_all_finite`` read at once (under the guard against the program's modes)."""
    if not tensors:
        return True
    with quiet_from_modes(tensors):
        flag = _all_finite(tensors)
        return flag if isinstance(flag, bool) else _truth(flag)


def _relative_peak(norms, group) -> float:
    """How far the largest of ``norms`` (of the tensors of ``group``, on the CPU) is towards the largest finite
    value of the narrowest floating dtype among them, in orders of magnitude: log(norm) / log(finfo.max), 1.0 for
    a norm that is not finite, 0.0 for one of at most 1."""
    top = _TB.item(norms.max())
    if top - top != 0:
        return 1.0
    fmax = min((torch.finfo(t.dtype).max for t in group if t.is_floating_point()), default=None)
    if fmax is None or top <= 1.0:
        return 0.0
    return math.log(top) / math.log(fmax)


def _leaves_of(roots) -> list:
    """The leaf tensors a backward from ``roots`` reaches (walk bounded), the roots that are leaves too."""
    out, _ = accumulated_leaves(roots, _MAX_LEAF_WALK)
    seen = {id(v) for v in out}
    for r in roots:  # backward from a leaf itself
        if r.grad_fn is None and r.requires_grad and id(r) not in seen:
            out.append(r)
    return out
