"""Gradients that backward adds up itself, checked for an overflow of their sum (explain, ``run --check-values``).

NOTE [Gradients the engine adds up]
A tensor used twice (a residual's skip and branch, tied input and output embeddings) gets as its gradient the sum
of its uses' gradients, and the engine adds them up itself (its input buffer) before it calls the tensor's node,
so no node's output is that sum: each use's gradient can be finite and the sum not (float16: 40000 + 60000). A
leaf's ``.grad`` is a sum too, across backward calls (gradient accumulation over micro-batches). Both overflow
like any product of the backwards of NOTE [Gradients that may overflow], so they are checked in those backwards
only (every node hooked: the run's first, after a large gradient, with float16/bfloat16 or a non-finite saved
value), where every producer's own output is checked by its post hook first:
- each node that receives gradients along two edges or more gets a pre hook, which sees the sum the engine made
  (torch runs a node's pre hooks on its summed input). Non-finite there while every contribution was finite is
  the origin: the op is the engine's ``add``, the node the one whose input it was, the line the first use's
  forward line (the use made first in the forward pass), beside all the uses' lines (``summed``) and the
  backward line. The contributions are kept (a reference each, from the producers' post hooks) until that pre
  hook runs, for their statistics;
- each AccumulateGrad node gets a post hook (run after it added the gradient into ``.grad``): a ``.grad`` that is
  not finite after a finite gradient was added to it, when the gradients checked after the backward before were
  finite, is the origin: ``.grad`` accumulated past the dtype's range across backward calls.
A float32 sum that overflows within one later backward is reported at the gradient sink without its node, as for
the nodes of NOTE [Gradients that may overflow].

NOTE [Sums checked on a GPU]
On CUDA, reading a value waits for the GPU, and the sinks read their flags in batches (NOTE [Checking values at the
sinks]); the node hooks, which read each gradient, do not go on. The sums' hooks do, in the same backwards, but read
nothing: each pre hook (and AccumulateGrad's post hook) queues on the device one small float64 vector, whether the
sum is non-finite while every contribution is finite, what the sum holds (NaN, +Inf) and each contribution's
statistics (min and max of its finite values, zeros, negatives, non-finite count, size), beside what is known on
the host without a read (the node, its uses, the backward line and step). The gradient sink's own check carries
the queue; only when that check is read and failed are the vectors read, in one transfer, and the first whose
flag is set is the origin, as on the CPU. A finite check drops them unread. The contributions are not kept past
their sum's hook (their statistics are taken there), so nothing the program made lives longer.
"""

from __future__ import annotations

import ast
import functools
import weakref

import torch

from tensorscope import source
from tensorscope.instrument.origin_walk import _MAX_INPUTS, _cpu_floating, _finite, stats, value_of
from tensorscope.instrument.quiet import quiet_from_modes


class GradSums:
    """The hooks of NOTE [Gradients the engine adds up] for one backward, beside ``check``'s (origin_walk.GradCheck):
    put on by ``arm`` in the backwards where every node is hooked, taken off with the check's own handles."""

    def __init__(self, check):
        self.check = check
        self._feeds: dict = {}  # producer seq -> [(output index, target)]
        self._given: dict = {}  # target -> [(producer seq, the gradient it gave)]
        self.device = False  # NOTE [Sums checked on a GPU]: the hooks queue flags on the device, read at the sink
        self.queued: list = []  # (device vector, host facts) of this backward's sums, in the order they ran

    def clear(self) -> None:
        self._feeds.clear()
        self._given.clear()  # the gradients kept for a sum's statistics: released with the hooks

    def take(self) -> list:
        """The device vectors this backward queued (NOTE [Sums checked on a GPU]), handed to the gradient sink."""
        queued, self.queued = self.queued, []
        return queued

    def arm(self, graph: dict, device: bool = False) -> None:
        """The hooks of NOTE [Gradients the engine adds up] on the nodes of ``graph`` (every one is hooked); with
        ``device``, the hooks of NOTE [Sums checked on a GPU]."""
        self.device = device
        self.queued = []
        pre, acc = (self._pre_sum_device, self._accumulated_device) if device else (self._pre_sum, self._accumulated)
        into: dict = {}  # target -> (node, [producer seq, one per edge])
        for seq, (node, _) in graph.items():
            try:
                edges = node.next_functions
            except Exception:
                continue
            for i, (child, _) in enumerate(edges):
                key = _target(child)
                if key is not None:
                    into.setdefault(key, (child, []))[1].append(seq)
        handles = self.check.handles
        for key, (node, made_by) in into.items():
            try:
                if len(made_by) >= 2:
                    for seq in made_by:
                        self._feeds.setdefault(seq, [])
                    handles.append(node.register_prehook(functools.partial(pre, key, node, made_by)))
                if key[0] == "leaf":
                    handles.append(node.register_hook(functools.partial(acc, node, made_by)))
            except Exception:
                continue
        for seq, (node, _) in graph.items():
            if seq not in self._feeds:
                continue
            try:
                for i, (child, _) in enumerate(node.next_functions):
                    key = _target(child)
                    if key is not None and len(into[key][1]) >= 2:
                        self._feeds[seq].append((i, key))
                handles.append(node.register_hook(functools.partial(self._give, seq)))
            except Exception:
                continue

    def _give(self, seq, grad_inputs, grad_outputs):
        """A producer's post hook: keep the gradients it gives to a node that sums them (for their statistics)."""
        if self.check.birth is not None or self.check.watch.busy:
            return
        for i, key in self._feeds.get(seq, ()):
            g = grad_inputs[i] if i < len(grad_inputs) else None
            if g is not None:
                self._given.setdefault(key, []).append((seq, g))

    def _pre_sum(self, key, node, made_by, grad_outputs):
        """The engine summed the gradients of ``node``'s uses: non-finite from finite ones is the origin."""
        given = self._given.pop(key, [])
        if self.check.birth is not None or self.check.watch.busy:
            return
        try:
            got = [g for g in grad_outputs if _cpu_floating(g)]
            with quiet_from_modes((*got, *(g for _, g in given))):
                bad = next((g for g in got if not _finite(g)), None)
                if bad is None or any(_cpu_floating(g) and not _finite(g) for _, g in given):
                    return  # finite, or a use passed on a gradient that was not: not the sum
            self.check.birth = self._birth(node, made_by, bad, [g for _, g in given], "backward")
        except Exception:
            pass

    def _accumulated(self, node, made_by, grad_inputs, grad_outputs):
        """AccumulateGrad's post hook: ``.grad`` not finite after a finite gradient was added to it."""
        w = self.check.watch
        if self.check.birth is not None or w.busy or w.pending_grad is not None:
            return  # the gradients after the backward before were not finite: that backward is the first
        try:
            grad = node.variable.grad
            if not _cpu_floating(grad):
                return
            got = [g for g in grad_outputs if _cpu_floating(g)]
            with quiet_from_modes((grad, *got)):
                if _finite(grad) or not all(_finite(g) for g in got):
                    return
            self.check.birth = self._birth(node, made_by, grad, got, "accumulated")
        except Exception:
            pass

    # --- NOTE [Sums checked on a GPU] ---------------------------------------------------------------------

    def _pre_sum_device(self, key, node, made_by, grad_outputs):
        given = self._given.pop(key, [])
        if self.check.watch.busy:
            return
        got = [g for g in grad_outputs if _device_floating(g)]
        if got:
            self._queue(node, made_by, got[0], [g for _, g in given], "backward")

    def _accumulated_device(self, node, made_by, grad_inputs, grad_outputs):
        if self.check.watch.busy:
            return
        try:
            grad = node.variable.grad
        except Exception:
            return
        if _device_floating(grad):
            self._queue(node, made_by, grad, [g for g in grad_outputs if _device_floating(g)], "accumulated")

    def _queue(self, node, made_by, made, given, how) -> None:
        """One vector on the device: [made non-finite from finite contributions, holds NaN, holds +Inf, then six
        statistics per contribution]; no value is read here."""
        if len(self.queued) >= _MAX_QUEUED:
            return
        try:
            given = [g for g in given if _device_floating(g)][:_MAX_INPUTS]
            with quiet_from_modes((made, *given)):
                m = made.detach()
                parts = [(~torch.isfinite(m).all()).view(1)]
                for g in given:
                    parts.append(torch.isfinite(g.detach()).all().view(1))
                flag = torch.cat(parts).all().view(1) if given else parts[0]
                vec = torch.cat([flag.double(), torch.isnan(m).any().double().view(1),
                                 torch.isposinf(m).any().double().view(1), *(_device_stats(g) for g in given)])
            facts = self._host_facts(node, made_by, made, len(given), how)
            facts["shapes"] = [list(g.shape) for g in given]
            self.queued.append((vec, facts))
        except Exception:
            pass

    def _host_facts(self, node, made_by, made, count, how) -> dict:
        """What a birth needs that is known on the host without reading a value (the node, its uses' sequence
        numbers, the forward and backward lines, the step)."""
        w = self.check.watch
        leaf = getattr(node, "variable", None)
        try:
            fseq = None if leaf is not None else node._sequence_nr()
        except Exception:
            fseq = None
        return {"node": node.name(), "made_by": list(made_by), "leaf": weakref.ref(leaf) if leaf is not None else None,
                "forward_seq": fseq, "cur": dict(w.tracker.backward_calls.current or {}), "step": w.backward_calls,
                "dtype": str(made.dtype).replace("torch.", ""), "shape": list(made.shape), "count": count, "how": how}

    def read_queued(self, queued) -> dict | None:
        """The failed gradient sink's queue read in one transfer: the first sum made non-finite from finite
        contributions, as a birth (NOTE [Sums checked on a GPU]), or None."""
        if not queued:
            return None
        try:
            vecs = [v for v, _ in queued]
            with quiet_from_modes(vecs):
                rows = [v.tolist() for v in torch.cat(vecs).to("cpu").split([v.numel() for v in vecs])]
        except Exception:
            return None
        for row, facts in zip(rows, queued):
            if not row[0]:
                continue
            facts = facts[1]
            value = "nan" if row[1] else ("inf" if row[2] else "-inf")
            inputs = [_stats_of(row[3 + 6 * i:9 + 6 * i], facts["dtype"], facts["shapes"][i])
                      for i in range(facts["count"])]
            leaf = facts["leaf"]() if facts["leaf"] is not None else None
            try:
                return self._facts_birth(facts["node"], facts["made_by"], leaf, facts["forward_seq"], facts["cur"],
                                         facts["step"], value, facts["dtype"], facts["shape"], inputs, facts["how"])
            except Exception:
                return None
        return None

    def _read_uses(self, uses, count, leaf, ffile, fline, cur) -> list:
        """The uses' lines where some of their nodes have none recorded (a node that saved nothing, on Python before
        3.12): the statements that read the tensor's name in its scope, after the line that made it (or its
        first known use) and before the backward line, until the name is bound again."""
        tr = self.check.watch.tracker
        if leaf is not None:
            names = tr.tensor_names.get(tr.tid(leaf)) or []
            made = tr.tensor_created.get(tr.tid(leaf)) or {}
            file = uses[0][0] if uses else made.get("file")
            after = made.get("line") if made.get("file") == file and made.get("line") else None
            if after is None and uses:
                after = uses[0][1] - 1
            elif not names and after:
                names = [source.bound_name(file, after)]  # names are read later, at the report: the line that made it
        else:
            file, after = ffile, fline
            names = [source.bound_name(ffile, fline)] if fline else []
        if not file or after is None or not names or not names[0]:
            return uses
        stop = cur.get("line") if cur.get("file") == file and (cur.get("line") or 0) > after else None
        found = sorted(set(uses) | {(file, n) for n in use_lines(file, names[0], after, stop)}, key=lambda u: u[1])
        return found if len(found) <= count else uses + [u for u in found if u not in uses][:count - len(uses)]

    def _birth(self, node, made_by, made, given, how) -> dict:
        w = self.check.watch
        leaf = getattr(node, "variable", None)
        try:
            fseq = None if leaf is not None else node._sequence_nr()
        except Exception:
            fseq = None
        return self._facts_birth(node.name(), made_by, leaf, fseq, w.tracker.backward_calls.current or {},
                                 w.backward_calls, value_of(made), str(made.dtype).replace("torch.", ""),
                                 list(made.shape), [dict(stats(g), tensor=None) for g in given[:_MAX_INPUTS]
                                                    if _cpu_floating(g)], how)

    def _facts_birth(self, name, made_by, leaf, fseq, cur, step, value, dtype, shape, inputs, how) -> dict:
        tr = self.check.watch.tracker
        uses = []
        for seq in sorted(set(made_by)):  # in forward order
            try:
                f, line = tr.node_line(seq)
            except Exception:
                f = line = None
            if line is not None and (f, line) not in uses:
                uses.append((f, line))
        try:
            ffile, fline = (None, None) if fseq is None else tr.node_line(fseq)
        except Exception:
            ffile = fline = None
        if len(uses) < len(set(made_by)) and (uses or fline):
            uses = self._read_uses(uses, len(set(made_by)), leaf, ffile, fline, cur)
        first = uses[0] if uses else (cur.get("file"), cur.get("line"))
        return {"op": "aten.add", "aten": "aten.add.Tensor", "node": name, "phase": "backward",
                "file": first[0], "line": first[1], "step": step,
                "tensor": tr.tid(leaf) if leaf is not None else None, "value": value,
                "dtype": dtype, "shape": shape, "inputs": inputs, "data": False, "intended": False, "forward_file": ffile, "forward_line": fline,
                "backward_file": cur.get("file"), "backward_line": cur.get("line"), "found_by": "node hook",
                "summed": [{"file": f, "line": line} for f, line in uses], "sum": how}


_MAX_QUEUED = 4096  # sums queued on the device in one backward (a vector of a few numbers each)


def _device_floating(g) -> bool:
    return isinstance(g, torch.Tensor) and (g.is_floating_point() or g.is_complex()) and g.numel() > 0 \
        and g.device.type not in ("cpu", "meta")


def _device_stats(g):
    """min and max of the finite values, zeros, negatives, non-finite count and size, as float64 on g's device."""
    x = g.detach()
    if x.is_complex():
        x = torch.view_as_real(x)
    finite = torch.isfinite(x)
    big = torch.finfo(x.dtype).max
    return torch.stack([torch.where(finite, x, big).min().double(), torch.where(finite, x, -big).max().double(),
                        (x == 0).sum().double(), (x < 0).sum().double(), (~finite).sum().double(),
                        finite.sum().double()]).to(torch.float64)


def _stats_of(row, dtype, shape) -> dict:
    """``stats``'s fields from a vector ``_device_stats`` made (read on the host)."""
    lo, hi, zeros, negatives, nonfinite, n_finite = row
    return {"dtype": dtype, "shape": shape, "min": lo if n_finite else None, "max": hi if n_finite else None,
            "zeros": int(zeros), "negatives": int(negatives), "nonfinite": int(nonfinite),
            "numel": int(n_finite + nonfinite), "tensor": None}


_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
             ast.AsyncFunctionDef, ast.ClassDef)


def use_lines(file, name, after, stop=None) -> list:
    """The lines of the simple statements of one scope after line ``after`` (and before ``stop``) that read ``name``,
    until a statement binds it again (NOTE [Gradients the engine adds up])."""
    stmt = source.statement_at(file, after + 1) or source.statement_at(file, after)
    scope = source.scope_of(stmt) if stmt is not None else None
    if scope is None:
        return []
    out = []
    for s in source.scope_statements(scope):
        if s.lineno <= after or isinstance(s, _COMPOUND):
            continue
        if stop is not None and s.lineno >= stop:
            break
        if name in source.reads(s):
            out.append(s.lineno)
        if name in source.assigned(s)[0]:
            break
    return out


def _target(child):
    """The key of a node that receives gradients: ("leaf", id of its tensor) for an AccumulateGrad (whose sequence
    number is the same for every one), else ("node", its sequence number); None for no node."""
    if child is None:
        return None
    try:
        if type(child).__name__ == "AccumulateGrad":
            return ("leaf", id(child.variable))
        return ("node", child._sequence_nr())
    except Exception:
        return None
