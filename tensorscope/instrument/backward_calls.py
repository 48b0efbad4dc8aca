"""Backward-time facts of a run: each backward()/autograd.grad call, its roots and leaves,
and what a failing one leaves behind (the freed graph, the stale saved tensor).

A collaborator owned by the run's Tracker (see NOTE [One recorder, its collaborators] in tracker.py);
every method must never raise into the program.
"""

from __future__ import annotations

import threading
import weakref

import torch

from tensorscope import compat
from tensorscope.instrument import links, retention, stale
from tensorscope.instrument.failure_graph import _is_freed_error, accumulated_leaves, leaves_key, same_leaves
from tensorscope.instrument.frames import receiver, user_frame
from tensorscope.instrument.recorder import _DTYPE_NAMES, _INSPECTABLE, _ONE_AGGREGATED, count_site
from tensorscope.instrument.recorder import _dtype_name, inspectable

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_get_ident = threading.get_ident
_get_sequence_nr = torch._C._autograd._get_sequence_nr
_MAIN_ID = threading.main_thread().ident  # as lines.py reads it (LineRecord.note_thread)
# the C getter of ``requires_grad`` (patches.py puts a Python property in front of it on ``torch.Tensor``)
_RG = torch._C.TensorBase.requires_grad.__get__  # as patches.py reads it (the property is put on torch.Tensor)
_MAX_BACKWARDS = 256
# NOTE [Walking a large graph once per line]
# A backward event lists the leaves it reached (``leaves_with_grad``), found by walking the graph
# from its roots through ``next_functions``. That walk makes a Python object for every node it
# passes, and torch keeps each one alive as long as its node: 10,000 objects per backward of a
# 2,000-layer model, promoted into the program's oldest GC generation, where they set off extra
# full collections of its whole heap (the walk doubled the run's collector time). So a graph of
# more than _REWALK_NODES nodes is walked once per backward line: the later backward calls of a
# training loop from that line list the leaves of its first walk that have a ``.grad``
# (``leaves_walked: false`` in the event; weak references, no tensor kept alive).
_REWALK_NODES = 2_000
_MAX_SITES = 1024  # (line, thread) entries of site_leaves before the table starts again


# NOTE [A backward line's place, read once]
# ``Recorder.location`` of a backward call (the program's file, line and call text, and the library function it
# ran inside) depends on nothing but the program's code and instruction (``uf.f_code``, ``uf.f_lasti``) and the
# library frame's code (``frame.f_code``): each of its parts is already cached by those (``line_of``,
# ``call_segment``, ``library_name``). A training loop's backward line reads them at every step, so the place is
# kept whole under that key, with both codes held for the identity check (a key's ids are reused only once a
# code is gone) and ``uf is frame`` in the key (no library then). A place whose call text could not be read yet
# (a file linecache cannot read now) is not kept: it is looked up again at the next call, as ``call_segment``
# does. The dict handed out is read, never written: ``before`` copies what it keeps.
_PLACES: dict = {}
_MAX_PLACES = 4096
# the place kept last, (code, f_lasti, library code, place): a loop's one backward line, found without the key
# (replaced whole, so a thread reads one entry or another, never a mix)
_LAST_PLACE: list = [None]

# NOTE [A backward call's facts, read cheaply]
# A training loop's backward line runs ``before`` at every step, and once the line's detailed events are used up
# (``Recorder.allow``) all it does is count the call and keep the call's record for ``backwards`` (backward-twice,
# the report): the place, the roots' facts and the sequence number. grad_fn node identities are new at every step,
# so nothing about the roots is carried over from the last step; what is saved is the way they are read, each in
# the same order and with the same result: the calling frame is taken as the program's when its file's verdict
# says so (``user_frame``'s first test), the place is the last one kept when its code, instruction and library code
# are the same objects (``_place``'s own key, tested in line), ``allow`` is inlined on the place's file and line
# (what ``allow`` reads: ``location`` takes ``uf.f_code.co_filename`` and ``line_of(uf)``), and the roots' facts
# are read without Python calls: ``requires_grad`` of a ``torch.Tensor`` or ``Parameter`` through the C getter
# that patches.py's property calls (a subclass of the program's is read by attribute, as before), the node's
# name as ``node_name`` writes it, the dtype's name from its table. Together with the wrapper's one frame read
# (make_backward) and ``after``'s main-thread test by ident (``threading.current_thread() is main`` holds exactly
# when the thread's ident is the main thread's, as LineRecord.note_thread tests it), this took small_mlp's
# ``before`` from 42.8k to 35.8k instructions a step and ``after`` from 10.4k to 9.6k (benchmarks/RESULTS.md,
# "speedb19").


def _place(rec, frame, uf) -> dict:
    """``rec.location(frame, uf)``, kept per place (see the NOTE above)."""
    if uf is None or frame is None:
        return rec.location(frame, uf)
    code = uf.f_code
    fcode = None if uf is frame else frame.f_code
    key = (id(code), uf.f_lasti, id(fcode))
    entry = _PLACES.get(key)
    if entry is not None and entry[0] is code and entry[1] is fcode:
        _LAST_PLACE[0] = (code, key[1], fcode, entry[2])
        return entry[2]
    loc = rec.location(frame, uf)
    if loc["segment"] is not None:
        if len(_PLACES) >= _MAX_PLACES:
            _PLACES.clear()
        _PLACES[key] = (code, fcode, loc)
        _LAST_PLACE[0] = (code, key[1], fcode, loc)
    return loc


class BackwardCalls:
    """The callbacks around backward() and torch.autograd.grad (patches.py), for one run."""

    def __init__(self, rec):
        self.rec = rec  # the run's Tracker
        self.backwards: list[dict] = []  # earlier backward calls (bounded), for backward-twice
        # (file, line) of a backward call -> weak references to the leaves of its first walk, for graphs
        # too large to walk at every call (see NOTE [Walking a large graph once per line])
        self.site_leaves: dict[tuple, list] = {}
        self.current: dict | None = None  # the backward running now: its file, line and segment
        self.retaining = False  # it keeps its graph (saved_checks: NOTE [A saved tensor its backward writes])
        self.roots: list | None = None  # its roots, while it runs (explain: a custom Function's writer)

    def before(self, op, args, kwargs, frame):
        """A backward()/autograd.grad call is about to run: its context for ``after``, or None.

        A training loop's backward line costs this at every step, so what it reads is read as cheaply as it
        can be, in the same order (NOTE [A backward call's facts, read cheaply])."""
        try:
            rec = self.rec
            if _get_ident() != _MAIN_ID:  # LineRecord.note_thread's own test, inlined
                rec.lines.note_thread()  # a thread's graph: numbers the main line record must not answer for
            if rec.failure is not None:  # the program went on after it: this call's saved tensors are its own
                rec.saved_failure = None  # (NOTE [The last failure, not the first] in recorder.py)
                rec.saved_checks.detached = None
            # the program's own frame: ``user_frame``'s first test, inlined (backward is called from the program's line)
            uf = frame if frame is not None and rec.user._verdict.get(frame.f_code.co_filename) is True else \
                user_frame(frame, rec.user)
            last = _LAST_PLACE[0]  # ``_place``, its last entry tested in line
            if (uf is not None and last is not None and last[0] is uf.f_code and last[1] == uf.f_lasti
                    and last[2] is (None if uf is frame else frame.f_code)):
                loc = last[3]
            else:
                loc = _place(rec, frame, uf)
            roots = args[0] if args else kwargs.get("tensors", kwargs.get("outputs"))
            roots = [roots] if isinstance(roots, _Tensor) else [r for r in (roots or []) if isinstance(r, _Tensor)]
            if roots and not (_INSPECTABLE.get(type(roots[0])) or inspectable(roots[0])):
                return None
            if kwargs:
                retain = kwargs.get("retain_graph")
                create = kwargs.get("create_graph", False)
            else:
                retain, create = None, False
            n = len(args)
            if n > 2:
                if op == "backward":
                    retain = args[2]
                    if n > 3:
                        create = args[3]
                elif op == "grad" and n > 3:
                    retain = args[3]
            if retain is None:
                retain = bool(create)
            seq_now = _get_sequence_nr()
            ctx = {"op": op, "file": loc["file"], "line": loc["line"], "segment": loc["segment"],
                   "retain_graph": bool(retain), "create_graph": bool(create), "seq_now": seq_now, "roots": [], "event": None,
                   "library": loc["library"]}
            root_facts = []
            detailed = False
            if uf is not None:
                # ``rec.allow("backward", uf)``, inlined: its site is the place's file and line (``location`` reads
                # them as ``allow`` does: ``uf.f_code.co_filename``, ``line_of(uf)``). Change both together.
                site = ("backward", loc["file"], loc["line"])
                counts = rec.site_counts
                count_site(counts, (site,))  # NOTE [Site counts from several threads] in recorder.py
                if counts[site] > rec.per_site:
                    count_site(rec.aggregated_counts, _ONE_AGGREGATED)
                    rec.counted_site = site
                elif len(rec.events) >= rec.max_events:
                    count_site(rec.aggregated_counts, _ONE_AGGREGATED)
                    rec.log_full = True
                else:
                    detailed = True
            for r in roots:
                # the full description only for recorded calls: a training loop calls this every step
                node = r.grad_fn  # read once: each read makes or finds the node's Python object
                kind = type(r)
                f = {"tensor": rec.note_tensor(r) if detailed else rec.tid(r),
                     "requires_grad": bool(_RG(r) if kind is _Tensor or kind is _Parameter else r.requires_grad),
                     "grad_fn": type(node).__name__ if node is not None else None,  # node_name, inlined
                     "dtype": _DTYPE_NAMES.get(r.dtype) or _dtype_name(r.dtype), "shape": list(r.shape),
                     "is_leaf": bool(r.is_leaf)}
                root_facts.append(f)
            ctx["roots"] = root_facts
            if op == "grad":  # see NOTE [The unused input's index before torch 2.9] in compat.py
                inputs = args[1] if len(args) > 1 else kwargs.get("inputs")
                ctx["_inputs"] = _weak([inputs] if isinstance(inputs, _Tensor) else
                                       [t for t in (inputs or ()) if isinstance(t, _Tensor)])
            if detailed:
                names = rec.names_in(uf, roots)
                receiver_name = receiver(loc["segment"], "backward") if loc["library"] is None else None
                for r, f in zip(roots, root_facts):
                    f["names"] = names.get(id(r), [])
                    if not f["names"] and receiver_name and receiver_name.isidentifier() and len(roots) == 1:
                        f["names"] = [receiver_name]
                    rec.add_names(f["tensor"], f["names"])
            leaves = []
            if detailed:
                site = leaves_key((loc["file"], loc["line"]))  # NOTE [Leaves cached per backward line and thread]
                known = self.site_leaves.get(site)
                if known is not None and not same_leaves(roots, known):
                    known = None
                walked = known is None
                if walked:
                    leaves, visited = accumulated_leaves(roots)
                    if visited > _REWALK_NODES:
                        if len(self.site_leaves) >= _MAX_SITES:
                            self.site_leaves.clear()
                        self.site_leaves[site] = _weak(leaves)
                else:
                    leaves = [v for v in (r() for r in known) if v is not None]
                ctx["event"] = rec.emit_open("backward", uf, op=op, roots=[f["tensor"] for f in root_facts],
                                              retain_graph=bool(retain), create_graph=bool(create),
                                              leaves_with_grad=[], ok=None)
                if not walked:
                    ctx["event"]["leaves_walked"] = False
            ctx["leaves"] = leaves
            # kept only while this backward runs: the failure path may need the graph (see _freed_facts)
            ctx["_roots"] = roots
            ctx["_frame"] = uf
            self.roots = roots if rec.check_values else None
            self.current = {"file": loc["file"], "line": loc["line"], "segment": loc["segment"]}
            self.retaining = bool(retain) and rec.check_values
            return ctx
        except Exception:
            return None

    def _carried_holders(self, roots, uf, failure) -> list:
        """The retention paths from the program's names into the freed graph (see NOTE [Retention walks])."""
        try:
            # only nodes an earlier backward freed: the failing one frees this iteration's own nodes as it goes, and
            # a name that reaches only those (this iteration's `output`) carries nothing (NOTE [The carried holder])
            nodes = (failure.get("graph") or {}).get("freed") or ()
            known = [n for n in nodes if n.get("freed_by") is not None]
            horizon = max([b.get("seq_now") or 0 for b in failure.get("backwards_before") or ()] or [0])
            freed = [n["seq"] for n in (known or [n for n in nodes if n["seq"] < horizon])]
            if not freed or uf is None:
                return []
            return retention.carried_holders(uf, self.rec.user, freed, exclude=roots)
        except Exception:
            return []

    def after(self, ctx, error, out=None):
        """The call ``ctx`` (from ``before``) returned ``out``, or raised ``error``."""
        if ctx is None:
            return
        try:
            rec = self.rec
            self.current = None
            self.roots = None
            if self.retaining:
                self.retaining = False
                rec.saved_checks.refresh_retained()  # NOTE [A saved tensor its backward writes]
            record = {"file": ctx["file"], "line": ctx["line"], "segment": ctx["segment"],
                      "retain_graph": ctx["retain_graph"], "seq_now": ctx["seq_now"], "ok": error is None,
                      "roots": ctx["roots"], "op": ctx["op"]}
            self.backwards.append(record)
            if len(self.backwards) > _MAX_BACKWARDS:
                del self.backwards[0]
            event = ctx["event"]
            if event is not None:
                event["ok"] = error is None
                got = []
                for v in ctx["leaves"]:
                    try:
                        if v.grad is not None:
                            # an id, not a description: the report describes a tensor it shows (a
                            # named one is described by the end-of-run snapshot), and describing
                            # thousands of parameters here allocated enough to set off full
                            # collections of the program's heap (0.25 s on a 4,000-parameter model)
                            got.append(rec.tid(v))
                    except Exception:
                        pass
                event["leaves_with_grad"] = got
                if error is None and ctx["op"] == "grad" and ctx["create_graph"]:
                    # gradients asked for with a graph that came back without one (NOTE [A gradient
                    # without a graph] in kinds/_provenance.py)
                    outs = [t for t in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(t, _Tensor)]
                    event["results_require_grad"] = any(t.requires_grad for t in outs)
            ctx["leaves"] = None
            roots, uf = ctx.pop("_roots", None), ctx.pop("_frame", None)
            if error is None and _get_ident() == _MAIN_ID:  # the main thread (threading.current_thread() is it)
                rec.growth.boundary(uf)  # see NOTE [Sampling growth]
            if error is not None and rec.new_failure(error):  # NOTE [The last failure, not the first]
                for r in roots or []:
                    rec.note_tensor(r)
                failure = {"where": "backward", "op": ctx["op"], "file": ctx["file"], "line": ctx["line"],
                           "segment": ctx["segment"], "exception_type": type(error).__name__,
                           "message": str(error)[:2000], "roots": ctx["roots"],
                           "saved": rec.saved_failure, "library": ctx["library"],
                           "backwards_before": self.backwards[:-1][-32:]}
                rec.record_failure(failure)
                if not rec.failure_graphs():
                    pass
                elif _is_freed_error(failure["message"]):
                    failure["graph"] = rec.failure_graph.freed_facts(roots or [], uf, failure["backwards_before"])
                    failure["links"] = links.find(roots or [], failure["backwards_before"], rec.node_line)
                    failure["holders"] = self._carried_holders(roots or [], uf, failure)
                    for n in (failure["graph"] or {}).get("freed", []):
                        if n["seq"] not in rec.node_lines:
                            file, line = rec.node_line(n["seq"])
                            if line is not None:
                                rec.node_lines[n["seq"]] = (file, line)
                elif stale.is_version_error(failure["message"]):
                    saved, graph = rec.failure_graph.stale_facts(roots or [], str(error))
                    if failure["saved"] is None and saved is not None:
                        failure["saved"] = rec.saved_failure = saved
                    failure["autograd_graph"] = graph
                elif compat.unused_input_without_index(failure["message"]):
                    failure["unused_input"] = _first_unused(roots or [], ctx.pop("_inputs", None) or [])
                elif stale.is_stale_error(failure["message"]):  # a saved tensor detached in place
                    saved, graph = rec.failure_graph.stale_facts(roots or [], str(error))
                    failure["detached"] = rec.saved_checks.detached or saved
                    failure["autograd_graph"] = graph
        except Exception:
            pass


def _first_unused(roots, inputs, limit: int = 100_000) -> int | None:
    """The index of the first of ``inputs`` (weak refs) that the graph of ``roots`` does not reach: its
    ``grad_fn`` is not in it, or, for a leaf, no ``AccumulateGrad`` node of it is (bounded walk)."""
    nodes, leaves, stack = set(), set(), [r.grad_fn for r in roots if r.grad_fn is not None]
    while stack and len(nodes) < limit:
        n = stack.pop()
        if n is None or n in nodes:
            continue
        nodes.add(n)
        v = getattr(n, "variable", None)
        if isinstance(v, _Tensor):
            leaves.add(id(v))
        stack.extend(f for f, _ in n.next_functions)
    if stack:
        return None  # not walked to the end: no claim
    root_ids = {id(r) for r in roots}
    for i, ref in enumerate(inputs):
        t = ref()
        if t is None:
            return None
        if id(t) in root_ids or (t.grad_fn is not None and t.grad_fn in nodes) or id(t) in leaves:
            continue
        return i
    return None


def _weak(tensors) -> list:
    out = []
    for t in tensors:
        try:
            out.append(weakref.ref(t))
        except TypeError:
            pass
    return out
