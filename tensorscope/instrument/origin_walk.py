"""The origin of a non-finite value without a dispatch mode: the graph and the saved tensors at a failed
sink (forward), a check of each node's gradient while backward runs (backward).

NOTE [Origins from the graph]
When the loss given to ``backward()`` (or a value the program tested before raising) holds a NaN or an
Inf, its autograd graph is still alive, and so are the tensors ``explain``'s pack hook recorded for it
(saved.py: each ``Packed`` knows its node's sequence number, whether it is that node's output, and
the forward line). The forward origin is read from them, at that moment only:
- every saved tensor of a node in the graph is checked once (one reduction each). A saved output
  tells its node's output; a saved input tells the output of the node that made it (its
  ``grad_fn``), or, with no ``grad_fn``, that the data itself held the value (a *data* origin, named
  at the line that made the tensor when tensorscope saw it);
- the loss's own node is known non-finite. The known non-finite node made first in the forward pass
  (lowest sequence number) is where the value surfaced; the origin is the first node at or below it,
  through nodes whose output no saved tensor tells, that made a non-finite value from finite inputs.
  Where a node's inputs are saved and its op can be redone from them (``log``, ``sqrt``, ``acos``,
  ``pow`` with its saved exponent, ``mul``, ``div``, ``mm``, ``addmm``'s product without its unsaved
  bias, ``var``/``std`` with their saved dim and correction: ``_redo``) it is redone, which is
  exact; a division, ``std``/``var`` or a custom Function whose inputs hold a zero, or whose inputs are
  not all saved, may have made it; ops that cannot make a non-finite value from finite inputs in range
  (``neg``, ``add``, views, ``masked_fill``'s intended ``-inf``, ``where``) are passed through. With no
  such node below, the surfacing node itself is the origin (a softmax over an all-``-inf`` row), or a
  live tensor made from data holding a NaN (``torch.tensor`` of a list with a NaN) when that node
  cannot make one;
- a saved result that needs no gradient (``native_layer_norm``'s mean and rstd) has no ``grad_fn``, yet it
  is its node's value, not data: a non-finite one marks that node (``_result_of``);
- a mask's node (``masked_fill`` of ``-inf``) that is the first known non-finite node is passed over when a
  later known one is an op that turns such infinities back into finite values where a row keeps a finite
  entry (``logsumexp``, ``softmax``, ``exp``, ``amax``: ``_ABSORBS``): the mask wrote its ``-inf`` on
  purpose, and the all-masked row surfaced there (``_past_masks``), as in the dispatch mode's rule;
- its inputs' statistics are those of the node's saved inputs.
Nothing runs per op in the forward pass: the cost is the pack hooks ``explain`` already pushes.

NOTE [Checking each node's gradient]
For a backward whose loss was finite, a post hook goes on each node of the graph that can make a
non-finite gradient (NOTE [Which nodes' gradients are checked]; one walk of the graph per backward
call, removed after it). It checks the gradients the node produced (one ``sum`` and one read each,
CPU only) until the first node that made a non-finite gradient from finite ones: that node is the
backward origin, at the forward line that built it. Its saved tensors are still
alive in its post hook (the engine releases them after), so the node is run once more under a
dispatch mode that names the aten op that made the value and that op's inputs' statistics. A
custom Function's Python backward is not run again (its side effects would repeat): it is named by
its node, and its op is named while it runs instead (NOTE [A custom Function's backward, watched while it
runs]). The dispatch mode of that one rerun is not pushed before torch 2.11 (NOTE [The origin mode
crashes torch before 2.11] in compat.py): there the node and line are named without the aten op.

NOTE [A custom Function's backward, watched while it runs]
A custom Function's backward is the program's own Python code: running it again could repeat its side effects
(a counter, a print, a write to a buffer), so the rerun above is not done for it. Instead the engine's call of
it is watched as it happens: the engine looks up ``apply`` on the node's Python object
(``BackwardCFunction.apply``, which calls the Function's ``backward``) at every call, and the wrapper of it
(patches.py) pushes ``_FirstMade`` for the length of that call while this backward's nodes are hooked and no
origin is known yet, on the CPU, from torch 2.11 (as the rerun), for a Function whose ``backward`` is the
program's own code (not torch's: a compiled graph's ``CompiledFunction``, reentrant checkpoint's). The mode
records the first op whose floating output is non-finite while its floating inputs are finite, with the line
of the program's own code that called it (a line of the Function's ``backward``) and its inputs' statistics.
The node's post hook then decides as for any node: only when the Function's gradients came out non-finite from
finite ones is it the origin, named by its node, its op and the backward's line (the forward line that called
``Fn.apply`` is kept beside it). The cost is one ``sum`` and one read per floating output of the ops inside
the program's backwards, paid only until the first origin.

NOTE [Which nodes' gradients are checked]
Most nodes of a training graph cannot make a non-finite gradient from finite gradients and finite saved
values: views and reshapes, sums, matrix products, the usual activations, softmax, layer norm (its saved
``rstd`` is finite by its ``eps``). Of the 211 nodes of a step of the benchmark GPT, 4 can (its divisions),
and a hook on every node cost more than the rest of the backward check. So the post hook goes only on
nodes outside ``_FINITE_GRAD`` (a division, ``log``, ``sqrt``, ``pow``, ``acos``, a norm, ``std``, every
custom Function's backward, any node not listed), decided once per node type. A listed node can still
make one in two ways, and each puts the hook back on every node for the rest of the run:
- from a non-finite saved value, where the forward made a NaN or an Inf that the loss never saw (a
  ``where`` or a mask dropped it) and backward multiplies it by a zero gradient. So the pack hook sums
  each floating saved tensor on the CPU (one reduction and one read, a few microseconds) and notes one
  that is not finite (SavedChecks.nonfinite_saved);
- by overflow, a product past the largest float: that matters in float16 and bfloat16, so a saved tensor
  of either type does the same (SavedChecks.low_precision).
A float32 gradient that overflows in a listed node is pinned only in the backwards of NOTE [Gradients that may
overflow]. On a GPU no hook goes on (the gradients are checked on the CPU only).

NOTE [Gradients that may overflow]
A listed node (``AddmmBackward0``'s ``g.T @ x``, a ``MulBackward0``) makes an Inf from finite gradients and finite
saved values when the product passes the dtype's largest value. No bound read before backward tells when: a bound
from the saved values' norms multiplies one factor per layer along the graph, and passes float32's 3.4e38 on a
healthy GPT-sized model (36 products by 768-wide matrices of std 0.02, Frobenius norm 15 each: 15^36 = 2e42;
arithmetic, not measured on the benchmark's smaller GPT), so it would hook
every node of every run. What is known cheaply is the gradients' real size: the gradient sink after each backward
takes their 2-norms anyway (NOTE [Checking values at the sinks]). So every node is hooked:
- in the run's first backward on the CPU, where a bad initialisation, unnormalised data or padded rows
  overflow from the first step (a gradient grown by a factor at each layer: maxtext#614's "around 100x",
  "hit float32_max at around the 18th layer");
- in every backward after one whose largest gradient 2-norm passed ``finfo.max ** 0.25`` (4.3e9 in float32,
  1e77 in float64; healthy gradients are many orders below), where gradients grow towards the overflow;
- in every backward once a saved tensor's sum (which the pack hook takes anyway, for a NaN) passed
  ``finfo.max ** 0.5`` (1.8e19 in float32; ``SavedChecks.large_saved``): a gradient jumps from a healthy size to
  past the dtype's largest value within one later backward only by a product with such a value (an inverse
  propensity weight of 1e38 from a propensity that underflowed, a glitched sensor reading), and healthy
  activations and weights are many orders below. It costs one comparison per saved tensor; a later backward
  then costs what the first one did.
- in a backward whose loss (a CPU scalar, read by the loss check anyway) passed ``finfo.max ** 0.25``: a gradient
  that grows over many products, each below the saved-value bound (a long product of per-step factors from a tiny
  start value, a sequence longer than those before), goes with a forward that grew too, and the loss shows it
  before backward runs. That backward only (a large loss from unnormalised targets pays the hooks, never a
  finding); costs one comparison per backward.
A gradient that passes the dtype's largest value with neither (a surrogate loss that cancels to 0, ``p -
p.detach()``, over such a growth) is seen at the gradient sink without its node; its 2-norm (infinite) then hooks
every node of the following backwards, so an overflow that recurs (a loop that skips a step whose gradients are
not finite) is pinned at its next occurrence, and the finding says "pinned at step k+1; first seen at step k". A
program that applies the gradients (the parameters become NaN, the next forward is NaN) keeps the finding without
a node. The first backward's full hooks cost once per run (figures in
benchmarks/RESULTS.md, "Non-finite: remaining misses").

The gradients that backward adds up itself are checked in those same backwards:
NOTE [Gradients the engine adds up] in grad_sums.py.
"""

from __future__ import annotations

import ast
import re
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _pop_mode, _push_mode

from tensorscope import compat, source
from tensorscope.instrument.frames import line_of, peek_locals, user_frame
from tensorscope.instrument import state
from tensorscope.instrument.quiet import profiling as _profiling
from tensorscope.instrument.quiet import quiet, quiet_from_modes, unrecorded
from tensorscope.instrument.saved import Packed

_Tensor = torch.Tensor
_TensorBase = torch._C.TensorBase
_MAX_NODES = 20_000
_MAX_SAVED = 50_000
_MAX_INPUTS = 8
_MAX_CUSTOM = 64
_LARGE = 0.25  # a gradient 2-norm past finfo.max ** 0.25: 4.3e9 in float32 (NOTE [Gradients that may overflow])
_DISPATCH_SHIMS = ("eval_frame.py", "_compile.py")
# ops that write a value given as an argument: a -inf or NaN they make is a mask or a fill, made on purpose
MASK_OPS = frozenset({"masked_fill", "masked_fill_", "fill", "fill_", "full", "full_like", "new_full", "where",
                      "index_put", "index_put_", "index_fill", "index_fill_", "scatter", "scatter_"})
_BACKWARD = re.compile(r"Backward\d*$")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_ATEN = {"Softmax": "_softmax", "LogSoftmax": "_log_softmax", "ToCopy": "_to_copy", "Linalg_vector_norm": "linalg_vector_norm"}
# forward ops redone from their saved inputs (by the saved attribute's name) to see whether they made the value
_UNARY = {"Log": torch.log, "Log2": torch.log2, "Log10": torch.log10, "Log1p": torch.log1p, "Sqrt": torch.sqrt,
          "Rsqrt": torch.rsqrt, "Reciprocal": torch.reciprocal, "Exp": torch.exp, "Exp2": torch.exp2,
          "Expm1": torch.expm1, "Acos": torch.acos, "Asin": torch.asin, "Atanh": torch.atanh, "Acosh": torch.acosh,
          "Lgamma": torch.lgamma, "Digamma": torch.digamma, "Erfinv": torch.erfinv, "Tan": torch.tan,
          "Sinh": torch.sinh, "Cosh": torch.cosh, "Logit": torch.logit}
_BINARY = {"Mul": (torch.mul, "other"), "Div": (torch.div, "other"), "Mm": (torch.mm, "mat2"),
           "Mv": (torch.mv, "vec"), "Bmm": (torch.bmm, "mat2"), "Dot": (torch.dot, "tensor"),
           "Pow": (torch.pow, "exponent")}
# reductions redone with their saved dim, keepdim and correction
_REDUCE = {"Var": torch.var, "Std": torch.std}
# nodes that write a value on purpose (a mask's -inf), and nodes that turn an infinity among their inputs into a
# finite value where a row keeps one finite entry, or a new non-finite one where none does (an all-masked row)
_MASK_NODES = frozenset({"MaskedFill", "Where", "IndexPut", "IndexFill", "Scatter", "Fill"})
_ABSORBS = frozenset({"Softmax", "LogSoftmax", "Logsumexp", "Exp", "Amax", "Max", "MaxPool2DWithIndices"})
# ops that make a non-finite value from finite inputs by dividing (a zero among the saved inputs) or whose
# forward is the program's own; where they cannot be redone they may be the origin
_MAY = ("Div", "Std", "Var", "Norm", "LinalgVectorNorm", "Prod", "Cumprod", "Xlogy", "Pow", "Remainder", "Fmod",
        "Atan2", "Cdist", "BinaryCrossEntropy")


def aten_name(node_name: str) -> str:
    """``LogSoftmaxBackward0`` -> ``_log_softmax``, ``PowBackward0`` -> ``pow``: the aten op a node's forward ran."""
    base = _BACKWARD.sub("", node_name)
    return _ATEN.get(base) or _CAMEL.sub("_", base).lower()


def _floating(t) -> bool:
    return (isinstance(t, _Tensor) and (t.is_floating_point() or t.is_complex()) and t.layout == torch.strided
            and not t.is_meta and not t._is_zerotensor() and type(t) in (_Tensor, torch.nn.Parameter))


_SPARSE = {torch.sparse_coo: "_values", torch.sparse_csr: "values", torch.sparse_csc: "values",
           torch.sparse_bsr: "values", torch.sparse_bsc: "values"}


def sparse_values(t):
    """The stored values of a plain sparse tensor (COO, CSR, CSC, BSR, BSC), a strided tensor on the same memory
    (no copy), or None (NOTE [A sparse tensor autograd saved])."""
    try:
        read = _SPARSE.get(t.layout) if type(t) in (_Tensor, torch.nn.Parameter) else None
        return getattr(t.detach(), read)() if read is not None else None
    except Exception:
        return None


def _bad(t) -> bool:
    """A floating tensor holding a NaN or an Inf (one reduction and one read); of a sparse one, its stored values."""
    if isinstance(t, _Tensor) and t.layout in _SPARSE:
        t = sparse_values(t)
    if not _floating(t) or t.numel() == 0:
        return False
    x = t.detach()
    if x.is_complex():
        x = torch.view_as_real(x)
    return not bool(torch.isfinite(x).all())


def _has_zero(t) -> bool:
    try:
        return isinstance(t, _Tensor) and t.numel() > 0 and bool((t.detach() == 0).any())
    except Exception:
        return False


def value_of(t) -> str:
    """"nan", "inf" or "-inf": the first kind of non-finite value ``t`` holds."""
    if t.layout in _SPARSE:
        t = sparse_values(t)
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    if bool(torch.isnan(t).any()):
        return "nan"
    if bool(torch.isposinf(t).any()):
        return "inf"
    return "-inf"


def stats(t) -> dict:
    """min, max (of the finite values), zeros, negatives and non-finite counts, dtype and shape."""
    out = {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)}
    try:
        x = t.detach()
        if x.is_complex():
            x = torch.view_as_real(x)
        if not x.is_floating_point():
            x = x.double()
        finite = torch.isfinite(x)
        vals = x[finite]
        out.update(min=float(vals.min()) if vals.numel() else None, max=float(vals.max()) if vals.numel() else None,
                   zeros=int((x == 0).sum()), negatives=int((x < 0).sum()), nonfinite=int((~finite).sum()),
                   numel=int(x.numel()))
    except Exception:
        pass
    return out


# --- the forward walk --------------------------------------------------------------------------------------

def _graph(roots) -> dict:
    """seq -> (node, [child seqs]) for the nodes a backward from ``roots`` reaches (AccumulateGrad left out)."""
    out: dict = {}
    stack = [r.grad_fn for r in roots if isinstance(r, _Tensor) and r.grad_fn is not None]
    seen = set()
    while stack and len(out) < _MAX_NODES:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if not hasattr(node, "next_functions") or type(node).__name__ == "AccumulateGrad":
            continue
        kids = []
        for child, _ in node.next_functions:
            if child is not None and type(child).__name__ != "AccumulateGrad":
                try:
                    kids.append(child._sequence_nr())
                except Exception:
                    continue
                stack.append(child)
        try:
            out[node._sequence_nr()] = (node, kids)
        except Exception:
            pass
    return out


def _saved(tracker, graph: dict) -> dict:
    """seq -> the live Packed records of that node (from the pack hook's table, saved.py)."""
    out: dict = {}
    n = 0
    for refs in list(tracker.pending.values()):
        for r in refs:
            p = r()
            if p is None or p.kind is not None or p.seq_nr not in graph:
                continue
            out.setdefault(p.seq_nr, []).append(p)
            n += 1
            if n >= _MAX_SAVED:
                return out
    return out


def _redo(node, base: str, packs: list):
    """The node's forward output recomputed from its saved inputs, or None where it cannot be."""
    inputs = [p.tensor for p in packs if not p.is_output]
    if base in _UNARY and len(inputs) == 1:
        return _UNARY[base](inputs[0])
    if base in _REDUCE and len(inputs) == 1:  # var/std: a correction past the count makes NaN from finite values
        dim = getattr(node, "_saved_dim", None)
        return _REDUCE[base](inputs[0], dim=list(dim) if dim else None, keepdim=bool(getattr(node, "_saved_keepdim", False)),
                             correction=getattr(node, "_saved_correction", 1))
    ours = bool(packs)  # the node's saved tensors went through explain's pack hook (NOTE [Saved tensors read back])
    if base == "Addmm":  # a product past the dtype's range (float16: 65504), the bias left out (it is not saved)
        a, b = _attr(node, "mat1", ours), _attr(node, "mat2", ours)
        if a is not None and b is not None:
            return torch.mm(a, b)
    if base in _BINARY:
        fn, other = _BINARY[base]
        a, b = _attr(node, "self", ours), _attr(node, other, ours)
        if base == "Pow" and b is None:
            b = getattr(node, "_saved_exponent", None)
        if a is not None and b is not None:
            return fn(a, b)
    return None


def _attr(node, name, ours=False):
    """The node's saved tensor ``name`` (NOTE [Saved tensors read back]); ``ours``: the node's saved tensors are
    known to have gone through explain's pack hook (a ``Packed`` of its sequence number is live)."""
    raw = getattr(node, "_raw_saved_" + name, None)
    if raw is None:
        return None
    if not compat.CAN_READ_SAVED_DATA:
        return _unpacked(node, name) if ours else None
    try:
        d = compat.saved_data(raw)
    except Exception:
        return None
    return d.tensor if isinstance(d, Packed) else d  # with explain's hooks on, the data is our pack record


# NOTE [Saved tensors read back]
# The walk reads a node's saved tensors by name: ``addmm``'s ``mat1``/``mat2``, ``mul``'s ``self``/``other`` to
# redo the op (``_redo``), a division's divisor, and ``native_layer_norm``'s ``result1``/``result2`` (its mean and
# rstd, saved without a ``grad_fn``: ``_result_of`` tells them from a data input by identity). From torch 2.10
# ``SavedTensor.data`` gives them without any check (compat.py, NOTE [Reading a saved tensor without its checks]).
# torch 2.2 to 2.9 (measured on 2.2.2, 2.6.0, 2.9.1) have no such read: there the node's own getter
# (``node._saved_result1``) is used, only for a node of which a ``Packed`` of explain's is live. All the saved
# variables of one node are made in the same op call, under the same top of the saved-tensor hooks stack, so
# that getter calls explain's own ``unpack`` (never the program's hooks), which returns the ``Packed``'s tensor;
# with hooks, torch checks no version, and for a tensor that needs no gradient (``result1``, a data input) it
# returns the hook's tensor itself, so the identity test holds (measured on 2.6.0 and 2.9.1: ``node._saved_result1
# is`` the packed tensor; 2.2.2 returns a new tensor on the same bytes, so there the bytes and geometry are compared). ``state.recorder`` is None for the read, as in stale.walk, so that ``unpack`` records
# nothing (a stale or silently written saved tensor raises or is skipped, never noted). Before this read existed,
# on those releases layer_norm's non-finite mean and rstd (a float16 ``Linear`` that overflowed before a
# ``LayerNorm``) were taken for data the program fed in, and ``addmm``/``mul``/``div``/``mm``/``pow`` were never
# redone.
def _unpacked(node, name):
    prev = state.recorder
    state.recorder = None
    try:
        with quiet():
            t = getattr(node, "_saved_" + name)
    except Exception:
        return None
    finally:
        state.recorder = prev
    return t if isinstance(t, _Tensor) else None


def forward_origin(tracker, roots, step, scopes=None) -> dict | None:
    """The forward birth of the non-finite value ``roots`` hold (NOTE [Origins from the graph]), or None.

    ``scopes``: ``(file, line, locals)`` of finished frames of the program, innermost first, to name a data
    tensor in (the program raised: its frames are no longer running); by default the running frames."""
    graph = _graph(roots)
    if not graph:
        return None
    saved = _saved(tracker, graph)
    status: dict = {}  # seq -> True (a non-finite output) / False (finite)
    data: list = []  # (consumer seq, tensor): a non-finite saved input no node made
    for seq, packs in saved.items():
        for p in packs:
            t = p.tensor
            if not _floating(t):
                continue
            bad = _bad(t)
            if p.is_output:
                status[seq] = status.get(seq, False) or bad
                continue
            gf = t.grad_fn
            if gf is None:
                if bad and _result_of(graph.get(seq), t):  # a saved output that needs no gradient (layer_norm's
                    status[seq] = True                     # mean and rstd): the node's own value, not data
                elif bad:
                    data.append((seq, t))
                continue
            try:
                s = gf._sequence_nr()
            except Exception:
                continue
            status[s] = status.get(s, False) or bad
    for r in roots:
        if isinstance(r, _Tensor) and r.grad_fn is not None:
            status[r.grad_fn._sequence_nr()] = True
    bad_nodes = _past_masks(graph, sorted(s for s, b in status.items() if b and s in graph))
    surfaced = bad_nodes[0] if bad_nodes else None
    found = None  # (seq, redone output or None, exact)
    meets: set = set()  # nodes that may have met two infinities (NOTE [A NaN from an infinity a mask wrote])
    if surfaced is not None:
        below, stack = [], [surfaced]
        seen = {surfaced}
        while stack:
            s = stack.pop()
            below.append(s)
            for k in graph[s][1]:
                if k not in seen and k in graph and status.get(k) is None:
                    seen.add(k)
                    stack.append(k)
        data += _sparse_inputs(graph, saved, below)  # NOTE [A sparse tensor autograd saved]
        exact, maybe = [], []
        for s in sorted(below):
            node = graph[s][0]
            base = _BACKWARD.sub("", node.name())
            packs = saved.get(s, [])
            if s != surfaced and any(p.is_output for p in packs):
                continue
            tracker.pause()  # NOTE [Pausing the recorder] in tracker.py: torch's warnings of the op redone are not shown
            try:
                out = _redo(node, base, packs)
            except Exception:
                out = None
            finally:
                tracker.resume()
            if out is not None:
                if _bad(out):
                    exact.append((s, out))
                continue
            custom = isinstance(node, torch.autograd.function.BackwardCFunction)
            if custom or (base in _MAY and (any(_has_zero(p.tensor) for p in packs if not p.is_output)
                                            or not any(not p.is_output for p in packs))
                          and not _safe_divisor(node, base, bool(packs))):
                maybe.append((s, None))
        if not exact and _nan_from_nan(graph, saved, surfaced):  # NOTE [A NaN from an infinity a mask wrote]
            meets = {s for s in below if s != surfaced and _BACKWARD.sub("", graph[s][0].name()) in _INF_MEETS
                     and _mask_under(graph, s)}
            maybe = sorted(maybe + [(s, None) for s in meets])
        pick = exact[0] if exact else (maybe[0] if maybe else None)
        if pick is not None:
            found = pick
        elif surfaced is not None:
            found = (surfaced, None)
    if data:
        seq, t = min(data, key=lambda d: d[0])
        if found is None or seq <= found[0] or not _can_make(graph, saved, found, meets):
            return _birth(tracker, graph, saved, seq, None, step, data=t, scopes=scopes)
    if found is not None and not _can_make(graph, saved, found, meets):
        t = _data_tensor(tracker)
        if t is not None:
            return _birth(tracker, graph, saved, found[0], None, step, data=t, scopes=scopes)
        inline = _inline_below(tracker, graph, found[0])
        if inline is not None:
            b = _birth(tracker, graph, saved, found[0], None, step)
            b.update(op=f"aten.{inline['op']}", file=inline["file"], line=inline["line"], inputs=[], tensor=None,
                     read_by=None, value=b.get("value") or None)
            return b
        operand = _operand_by_name(tracker, graph, found[0], scopes)  # NOTE [An operand no node saved]
        if operand is not None:
            return _birth(tracker, graph, saved, found[0], None, step, data=operand, scopes=scopes)
        if not saved:  # no saved tensor seen (a graph built on another thread): an op that cannot make it is no origin
            return None
    if found is None:
        return None
    if found[0] == surfaced and found[1] is None and _BACKWARD.sub("", graph[surfaced][0].name()) in _SOFTMAXES \
            and not _mask_under(graph, surfaced):  # NOTE [An infinity no mask wrote, under a softmax]
        inline = _inline_below(tracker, graph, surfaced) or _inline_assigned(tracker, graph, surfaced)
        if inline is not None and inline["op"] in _ZERO_TO_INF:
            b = _birth(tracker, graph, saved, surfaced, None, step)
            b.update(op=f"aten.{inline['op']}", file=inline["file"], line=inline["line"], inputs=[], tensor=None,
                     read_by=b.get("op"), value="-inf")
            return b
    return _birth(tracker, graph, saved, found[0], found[1], step)


# NOTE [An infinity no mask wrote, under a softmax]
# A softmax (``log_softmax``, ``logsumexp``) over a row that is -inf in every entry is where the NaN surfaced, and
# it is named there when a mask's node (``masked_fill``, ``where``) under it wrote the -inf on purpose. With no
# mask's node under it, the -inf was made by an op: ``logits + torch.log(mask)`` (allennlp#890) takes the log of
# a 0/1 tensor outside autograd, which autograd never records (``add`` saves nothing). The statements of the
# graph below are then read for the one op autograd did not record (NOTE [An origin inside the reading line]);
# when it is a ``log`` (the op that turns a 0 into -inf), it is the origin, at its line. A mask made with
# ``masked_fill(~keep, float("-inf"))`` on a tensor that needs a gradient is a node under the softmax and keeps
# the softmax named; one made outside autograd on another line is no statement of the graph and changes nothing.
_SOFTMAXES = frozenset({"Softmax", "LogSoftmax", "Logsumexp"})


def _inline_assigned(tracker, graph, top) -> dict | None:
    """The one unrecorded op that can make a non-finite value in the statements that assigned the names the line
    of node ``top`` reads (``scores = logits + torch.log(mask)`` before ``torch.log_softmax(scores, 1)``: ``add``
    saved nothing, so no pack hook heard its line)."""
    try:
        file, line = tracker.node_line(top)
    except Exception:
        return None
    stmt = source.statement_at(file, line) if file in tracker.user else None
    if stmt is None:
        return None
    in_graph = {aten_name(n.name()) for n, _ in graph.values()}
    found = []
    for name in source.reads(stmt.value if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Return, ast.Expr))
                             else stmt):
        made = assignment(file, name, line)
        if made is not None:
            m = _inline(file, made["line"], None, in_graph)
            if m is not None:
                found.append(m)
    return found[0] if len(found) == 1 else None
_ZERO_TO_INF = frozenset({"log", "log2", "log10"})


# NOTE [A NaN from an infinity a mask wrote]
# A softmax written by hand over a row that a mask filled with -inf in every entry
# (``torch.exp(s - s.max(-1, keepdim=True).values)``) makes its NaN in the subtraction, -inf - -inf; neither
# ``masked_fill`` (it saves only the mask) nor ``sub`` (it saves nothing) tells its value, and ``exp``, whose saved
# output is the first known NaN, makes a NaN only from a NaN. So when the value surfaced as a NaN at such an op
# (``_NAN_FROM_NAN``) and nothing below was redone non-finite, the nodes below it that turn two infinities, or a 0
# and an infinity, into a NaN (``_INF_MEETS``: add, sub, mul) and have a mask's node under them may have made
# it, the first in the forward pass first. A division by a number that holds no 0 and nothing below 1 in
# magnitude (``scores / 2.0``, read from the node's ``_saved_other``: the pack hooks never see a wrapped
# number) makes nothing non-finite from a finite dividend, so it is no candidate (``_safe_divisor``).
_NAN_FROM_NAN = frozenset({"Exp", "Exp2", "Expm1", "Sigmoid", "Tanh", "Relu", "Gelu", "Silu", "Abs", "Neg", "Clamp",
                           "ClampMin", "ClampMax"})
_INF_MEETS = frozenset({"Add", "Sub", "Rsub", "Mul"})


def _safe_divisor(node, base: str, ours: bool = False) -> bool:
    """A division whose divisor, read from the node, holds no 0 and nothing below 1 in magnitude (see NOTE [A NaN
    from an infinity a mask wrote])."""
    if base != "Div":
        return False
    other = _attr(node, "other", ours)
    if not isinstance(other, _Tensor) or other.numel() == 0 or other.numel() > 1_000_000 or other.is_complex():
        return False
    try:
        o = other.detach()
        return bool(torch.isfinite(o).all()) and bool((o.abs() >= 1).all())
    except Exception:
        return False


def _nan_from_nan(graph, saved, surfaced) -> bool:
    """Whether the value surfaced as a NaN at an op that makes a NaN only from a NaN."""
    if surfaced is None or _BACKWARD.sub("", graph[surfaced][0].name()) not in _NAN_FROM_NAN:
        return False
    held = [p.tensor for p in saved.get(surfaced, []) if p.is_output and _floating(p.tensor)]
    try:
        return bool(held) and any(bool(torch.isnan(t.detach()).any()) for t in held)
    except Exception:
        return False


def _mask_under(graph, top, limit: int = 2000) -> bool:
    """Whether a mask's node (``masked_fill``, ``where``...) is at or below ``top`` in the graph."""
    stack, seen = [top], {top}
    while stack and len(seen) < limit:
        s = stack.pop()
        if _BACKWARD.sub("", graph[s][0].name()) in _MASK_NODES:
            return True
        for k in graph[s][1]:
            if k not in seen and k in graph:
                seen.add(k)
                stack.append(k)
    return False


def _result_of(entry, t) -> bool:
    """Whether ``t`` is one of the node's saved results (``_saved_result1``...), saved without a ``grad_fn``."""
    if entry is None:
        return False
    node = entry[0]
    for name in dir(node):
        if name.startswith("_raw_saved_result"):
            got = _attr(node, name[len("_raw_saved_"):], True)
            if got is t or (got is not None and not compat.CAN_READ_SAVED_DATA and _same_bytes(got, t)):
                return True
    return False


def _same_bytes(a, b) -> bool:
    """The same tensor's bytes and geometry: torch 2.2.2's getter returns a new tensor object for the hook's
    tensor (measured; 2.6.0 and 2.9.1 return the same object), so there identity is not enough."""
    try:
        return a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
    except Exception:
        return False


def _past_masks(graph, bad_nodes: list) -> list:
    """The known non-finite nodes in forward order, past a mask's node (a ``masked_fill`` of ``-inf``) when a later
    one is an op that takes such infinities in and gives a finite value back while a row keeps a finite entry
    (``logsumexp``, ``softmax``): the mask wrote its ``-inf`` on purpose, and the value surfaced where an
    all-masked row made a new one (NOTE [Origins from the graph])."""
    if len(bad_nodes) < 2:
        return bad_nodes
    base = {s: _BACKWARD.sub("", graph[s][0].name()) for s in bad_nodes}
    if base[bad_nodes[0]] not in _MASK_NODES:
        return bad_nodes
    rest = [s for s in bad_nodes if base[s] not in _MASK_NODES]
    return rest if rest and base[rest[0]] in _ABSORBS else bad_nodes


# NOTE [A sparse tensor autograd saved]
# A GCN normalises its adjacency as ``D^-1/2 A D^-1/2`` outside autograd and multiplies by it with
# ``torch.spmm(adj, support)`` (pytorch/examples' gcn). Where a node has no edge, ``1 / degree`` is inf, and
# ``inf * 0`` puts NaN in the adjacency's stored values: data the graph reads, through a saved *sparse* input of
# ``mm``. The pack hook keeps sparse tensors as PyTorch does, unread (NOTE [Tensors we do not inspect] in
# saved.py), so no Packed of them is in the walk's table; the NaN then surfaced at the next node whose output is
# saved, ``relu``, and was named there although ``relu`` cannot make a NaN. The nodes below the one where the value
# surfaced, whose outputs no saved tensor tells, are read for their saved sparse inputs by name (``_raw_saved_*``,
# as NOTE [Saved tensors read back]): a plain sparse tensor with no ``grad_fn`` whose stored values (``_values()``
# of COO, ``values()`` of the compressed layouts: views, no copy) are not finite is data, born where the program
# made it, as a strided one is (``_birth``). The statement found is often ``adj = adj.to_sparse()``: a conversion
# (``_CONVERSIONS``) cannot make the value and its receiver's name is bound to the result now, so the walk goes on
# to the statement that bound that name before it in the same function (``_before_conversion``): ``adj = adj /
# degree``, the division by 0. On torch 2.2 to 2.9 a node's saved tensor is read only where a Packed of the node is
# live (the node's own getter runs explain's unpack). Nothing runs while the program does: only at a failed sink,
# once, a ``dir()`` of each node below.


def _sparse_inputs(graph, saved, below) -> list:
    """(seq, tensor) of the non-finite plain sparse tensors with no ``grad_fn`` that the nodes ``below`` saved
    (NOTE [A sparse tensor autograd saved])."""
    out = []
    for s in sorted(below)[:_MAX_INPUTS * 64]:
        node = graph[s][0]
        ours = bool(saved.get(s))
        try:
            names = [a[len("_raw_saved_"):] for a in dir(node) if a.startswith("_raw_saved_")]
        except Exception:
            continue
        for name in names:
            try:
                t = _attr(node, name, ours)
            except Exception:
                continue
            if isinstance(t, _Tensor) and t.layout in _SPARSE and t.grad_fn is None and _bad(t):
                out.append((s, t))
    return out


def _can_make(graph, saved, found, meets=()) -> bool:
    """Whether the node found could have made a non-finite value from finite inputs (else it carried one in
    that no saved tensor shows: the data)."""
    seq, out = found
    if out is not None or any(p.is_output for p in saved.get(seq, [])):
        return True
    node = graph[seq][0]
    base = _BACKWARD.sub("", node.name())
    return base in _MAY or base in _UNARY or isinstance(node, torch.autograd.function.BackwardCFunction) \
        or seq in meets  # NOTE [A NaN from an infinity a mask wrote]


# NOTE [An operand no node saved]
# ``loss = criterion(output + log_prior, targets)`` with ``log_prior = torch.log(counts / counts.sum())`` made
# before the loop from counts that hold zeros (pytorch/examples' word_language_model with a unigram prior): the
# ``-inf`` enters the graph through ``add``, which saves nothing, so no saved tensor shows it, ``add`` (which
# cannot make an infinity from finite inputs) had no line of its own, and the origin read "aten.add at a line
# tensorscope did not record" with add's fix for ``inf - inf``. Where the node found cannot make the value and
# nothing else names it, the statements that ran it are read for their names (its own line, else the lines of
# the nodes that consumed its output, which a saved input of theirs recorded): the first non-finite floating
# tensor with no ``grad_fn`` such a statement reads is the node's operand, and it is a data origin like a saved
# one (``_birth``: the statement that assigned it, ``log``, at its line; NOTE [Back through the names a statement
# read]).


def _operand_by_name(tracker, graph, seq, scopes=None):
    """A non-finite floating tensor with no ``grad_fn`` read by name by a statement that ran node ``seq`` or
    consumed its output (NOTE [An operand no node saved]), or None."""
    lines = []
    for s in [seq] + [s for s, (_, kids) in graph.items() if seq in kids]:
        try:
            file, line = tracker.node_line(s)
        except Exception:
            continue
        if file in tracker.user and line and (file, line) not in lines:
            lines.append((file, line))
    for file, line in lines:
        for v in _bad_reads(tracker, file, line, scopes):
            return v
    return None


def _data_tensor(tracker):
    """A live tensor that tensorscope saw made from data (no grad_fn) holding a non-finite value."""
    try:
        live = tracker.live_tensors()
    except Exception:
        return None
    for tid, t in live.items():
        made = tracker.tensor_created.get(tid)
        if made and isinstance(t, _Tensor) and t.grad_fn is None and _bad(t):
            return t
    return None


def _birth(tracker, graph, saved, seq, out, step, data=None, scopes=None) -> dict:
    node = graph[seq][0]
    name = node.name()
    packs = saved.get(seq, [])
    try:
        file, line = tracker.node_line(seq)
    except Exception:
        file = line = None
    held = [p for p in packs if p.is_output and _bad(p.tensor)]
    value_from = out if out is not None else (held[0].tensor if held else data)
    inputs = []
    for p in [p for p in packs if not p.is_output][:_MAX_INPUTS]:
        s = stats(p.tensor)
        s["tensor"] = tracker.tid(p.orig() if p.orig is not None and p.orig() is not None else p.tensor)
        inputs.append(s)
    custom = isinstance(node, torch.autograd.function.BackwardCFunction)
    b = {"op": f"aten.{aten_name(name)}" if not custom else f"{_BACKWARD.sub('', name)}.forward", "aten": None,
         "node": None, "phase": "forward", "file": file, "line": line, "step": step,
         "tensor": tracker.tid(held[0].orig()) if held and held[0].orig() is not None else None,
         "value": value_of(value_from) if value_from is not None and _bad(value_from) else None,
         "dtype": str(value_from.dtype).replace("torch.", "") if value_from is not None else None,
         "shape": list(value_from.shape) if value_from is not None else None, "inputs": inputs, "data": False,
         "intended": False, "found_by": "graph", "seq": seq}
    if data is not None:
        tid = tracker.tid(data)
        b.update(data=True, data_tensor=tid, value=value_of(data), dtype=str(data.dtype).replace("torch.", ""),
                 shape=list(data.shape))
        made = tracker.tensor_created.get(tid) or outside_made(tracker, data) or assigned(tracker, data, scopes) \
            or _inline(file, line, aten_name(name)) or _read_by_name(tracker, file, line, scopes)
        if made and made.get("how", "").endswith("same statement"):
            made = _named_input_origin(tracker, made, scopes) or made
        if made and made.get("op") and made.get("how") == "computed without autograd":
            made = _back_through_names(tracker, made, scopes)
        if made is None:  # NOTE [A value a function returned, unnamed]
            made = _returned(tracker, file, line, data, scopes)
        if made:
            b["data_file"], b["data_line"], b["data_how"] = made.get("file"), made.get("line"), made.get("how")
            if made.get("op"):  # computed outside autograd by the program: that op is the origin, at its line
                b.update(op=f"aten.{made['op']}", data=False, file=made["file"], line=made["line"])
                # the saved inputs are the reader's, not its
                if made.get("how", "").endswith("same statement"):
                    b.update(inputs=[], tensor=None, read_by=f"aten.{aten_name(name)}")
                else:  # the value it made is the data tensor itself
                    b.update(inputs=[], tensor=tid, read_by=f"aten.{aten_name(name)}")
    return b


_PY_OPS = {ast.Div: "div", ast.Mult: "mul", ast.Add: "add", ast.Sub: "sub", ast.Pow: "pow", ast.MatMult: "matmul",
           ast.Mod: "remainder", ast.FloorDiv: "floor_divide"}


def assigned(tracker, t, scopes=None, frame=None) -> dict | None:
    """A tensor with no ``grad_fn`` that tensorscope did not see made from data: the program computed it outside
    autograd. The last statement of the program's own code that assigned the name holding it, before the line
    running now, and that statement's outermost op (``a / b``: ``div``; ``torch.log(x)``: ``log``). The running
    frames are read from ``frame`` outwards (by default this function's caller); in each, only the statements of
    its own function count, so a parameter (``def encode(self, x)``) leads to the caller that assigned it."""
    for file, line, scope in scopes or ():
        for name in [n for n, v in scope.items() if v is t]:
            made = assignment(file, name, line)
            if made is not None:
                return made
    if scopes is not None:
        return None
    f = frame if frame is not None else sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename in tracker.user:
            for name in [n for n, v in peek_locals(f).items() if v is t]:
                made = assignment(f.f_code.co_filename, name, f.f_lineno, after=f.f_code.co_firstlineno)
                if made is not None:
                    return made
        f = f.f_back
    return None


def outside_made(tracker, t) -> dict | None:
    """Where ``t``, a non-finite tensor autograd saved with no ``grad_fn``, was computed, as read when it was saved
    (NOTE [A value computed outside autograd, in a frame gone])."""
    values = tracker.values
    for ref, made in getattr(values, "outside", ()):
        if ref() is t:
            return made
    return None


# NOTE [A value computed outside autograd, in a frame gone]
# A tensor that needs no gradient and holds a NaN (``x = x / x.norm(...)`` of a blank image, inside a model's
# ``forward``) reaches the graph only as a saved input with no ``grad_fn``. When the program later raises or a
# sink fails, the function that computed it may have returned, and its locals with it: the traceback's frames
# do not hold it. So when explain's pack hook finds a saved tensor that is not finite (it sums each one until
# the first: NOTE [Which nodes' gradients are checked]) and it has no ``grad_fn``, the running frames are read
# at once, from the saving line outwards, for the statement that assigned the name holding it (``assigned``),
# and the answer is kept beside a weak reference to the tensor (a few at most, ValueWatch.outside). The data
# origin then names that statement and its op; a tensor no statement assigned stays a data origin at its
# reading line.


# NOTE [Back through the names a statement read]
# A saved input that is not finite, has no ``grad_fn`` and that no name holds (``(std + 1e-5)`` in
# ``y = w * (x - mean) / (std + 1e-5)``, where ``x`` needs no gradient) was computed outside autograd from the
# names its reading statement reads: the first of them that holds a non-finite floating tensor with no
# ``grad_fn`` leads to the statement that assigned it (``std = var.sqrt()``: ``sqrt``), or to the data when
# tensorscope saw that tensor made from data (``_read_by_name``). From a statement found so, the names it read are
# followed the same way while one of them is still not finite (``var = (x * x).mean(0) - mean * mean`` would be
# next if ``var`` held the NaN): the origin is the last statement whose reads were all finite
# (``_back_through_names``, a few statements at most). Values are read from the running frames, or from the
# finished frames of a traceback (``scopes``), as they are now: a name reassigned since is not followed.


def _bad_reads(tracker, file, line, scopes=None) -> list:
    """The non-finite floating tensors with no ``grad_fn`` that the statement at ``file:line`` reads by name."""
    stmt = source.statement_at(file, line)
    if stmt is None or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.While,
                                         ast.If, ast.With)):
        return []
    names = source.reads(stmt.value if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Return, ast.Expr))
                         else stmt)
    values = []
    for f_file, _line, scope in scopes or ():
        if f_file == file:
            values += [scope[n] for n in names if n in scope]
    if scopes is None:
        f = sys._getframe(2)
        while f is not None:
            if f.f_code.co_filename == file:
                local = peek_locals(f)
                values += [local[n] for n in names if n in local]
            f = f.f_back
    out = []
    for v in values:
        if isinstance(v, _Tensor) and v.grad_fn is None and _floating(v) and _bad(v) and \
                not any(v is o for o in out):
            out.append(v)
    return out


def _read_by_name(tracker, file, line, scopes=None) -> dict | None:
    """Where a nameless non-finite input of the statement at ``file:line`` came from (NOTE [Back through the names
    a statement read])."""
    for v in _bad_reads(tracker, file, line, scopes):
        made = tracker.tensor_created.get(tracker.tid(v)) or outside_made(tracker, v) or assigned(tracker, v, scopes)
        if made is not None:
            return made
    return None


def _back_through_names(tracker, made: dict, scopes=None) -> dict:
    """From a statement found computing a non-finite value outside autograd, back to the last one whose reads were
    finite (NOTE [Back through the names a statement read])."""
    for _ in range(8):
        nxt = _before_conversion(made)  # NOTE [A sparse tensor autograd saved]
        if nxt is not None:
            made = nxt
            continue
        for v in _bad_reads(tracker, made.get("file"), made.get("line"), scopes):
            nxt = tracker.tensor_created.get(tracker.tid(v)) or outside_made(tracker, v) or \
                assigned(tracker, v, scopes)
            if nxt is not None:
                break
        if nxt is None or (nxt.get("file"), nxt.get("line")) == (made.get("file"), made.get("line")):
            return made
        made = nxt
        if not made.get("op") or made.get("how") != "computed without autograd":
            return made
    return made


# methods that give their receiver's values in another layout, dtype or device: a non-finite value they hold was
# in the receiver (NOTE [A sparse tensor autograd saved])
_CONVERSIONS = frozenset({"to_sparse", "to_sparse_coo", "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr",
                          "to_sparse_bsc", "coalesce", "to_dense", "to", "cpu", "cuda", "float", "double", "half",
                          "bfloat16", "contiguous", "clone", "detach"})


def _before_conversion(made: dict) -> dict | None:
    """``adj = adj.to_sparse()`` found as where a value was computed: the statement that last bound the receiver's
    name before it, in the same function (the receiver itself is no longer bound to that name), or None."""
    if made.get("op") not in _CONVERSIONS or made.get("how") != "computed without autograd":
        return None
    file, line = made.get("file"), made.get("line")
    tree = source.tree(file) if file else None
    if tree is None:
        return None
    stmt = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and node.lineno == line:
            stmt = node
            break
    fn = stmt.value.func if stmt is not None and isinstance(stmt.value, ast.Call) else None
    if not isinstance(fn, ast.Attribute) or not isinstance(fn.value, ast.Name):
        return None
    name = fn.value.id
    scope = _enclosing(tree, line)
    prev = assignment(file, name, line, after=scope.lineno if scope is not None else 0)
    if prev is None or prev["line"] == line or _enclosing(tree, prev["line"]) is not scope:
        return None
    return prev


def _enclosing(tree, line):
    """The innermost function holding ``line``, or None at module level."""
    inner = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.lineno <= line <= (node.end_lineno or node.lineno):
            if inner is None or node.lineno > inner.lineno:
                inner = node
    return inner


# NOTE [A value a function returned, unnamed]
# ``out = lin(standardize(x))``: the value ``Linear`` saved was returned by a function of the program's own code and
# went into the module unnamed, so no running frame holds it and the function's frame (its locals) is gone when the
# value is saved or the sink fails. When the reading statement calls such a function by its name, with arguments
# that are names still bound in the reading frame to tensors or numbers (or constants), and the function's body is
# pure tensor code (only assignments to names and ``return``; calls only of ``torch``/``math`` functions and of
# methods of its own values, none in place (``_``), none drawing random numbers, no module's call (``self.fc(x)``:
# its hooks), no call of a bare name but a few builtins: ``_pure``), and no dispatch or function mode of the
# program's is on (it would see the ops), the function is called once more with those arguments, under ``no_grad``
# and ``_FirstMade`` (the recorder paused): it names the first op that made a non-finite value from finite inputs
# and the line of the function that ran it. The answer counts only when the value returned equals the saved one
# (NaN where it holds NaN): an argument changed since, or a body that reads state that changed, leaves the data
# origin at the reading line. It is tried where a non-finite value with no ``grad_fn`` was already found: in
# explain's pack hook (NOTE [A value computed outside autograd, in a frame gone]: the caller's frame, a model's
# ``forward``, still runs; a few times a run at most) and at a failed sink; nothing runs otherwise, and the second
# call is of code that has no effect but its result. Not before torch 2.11 (a dispatch mode over the program's
# ops: NOTE [The origin mode crashes torch before 2.11]).
# What "no effect" is, named rather than guessed from a name's shape: a function of a module is allowed only from
# ``math``, the op namespaces ``torch.nn.functional``, ``torch.linalg``, ``torch.special`` and ``torch.fft``, and
# ``torch`` itself where the name is an aten op (``torch._C._VariableFunctions``) or one of ``torch.functional``'s
# (``norm``, ``cdist``, ``einsum``): ``torch.save``, ``torch.manual_seed``, ``torch.set_default_dtype``,
# ``torch.distributed.all_reduce`` (a collective that one rank alone would hang on) and ``torch.cuda.synchronize``
# are refused. A method that changes its tensor without a trailing ``_`` (``retain_grad``, ``record_stream``) is
# refused too. An op can still draw random numbers where its name does not say so (``scaled_dot_product_attention``
# with ``dropout_p``), so the generators' states (the CPU's, and each CUDA device's once CUDA is initialised) are
# taken before the second call and put back after it: the program's next random number is the one python gives.
_BUILTINS_PURE = frozenset({"len", "float", "int", "abs", "min", "max", "range", "tuple", "list", "isinstance", "sum"})
_IMPURE = re.compile(r"(_$|^_|dropout|binomial|lowrank|^(backward|register_\w*|append|extend|update|insert|pop|write|print|"
                     r"rand\w*|normal|bernoulli|multinomial|poisson|gumbel_softmax|rrelu|uniform|exponential|"
                     r"geometric|cauchy|log_normal|retain_grad|record_stream)$)")
_PURE: dict = {}
#: the modules whose functions the second call may run (NOTE [A value a function returned, unnamed])
_OP_MODULES = frozenset({"math", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft"})


def _pure_function(mod, attrs) -> bool:
    """Whether ``mod.attrs[0].attrs[1]...`` names a function of an op namespace (``_OP_MODULES``, or an aten op or
    ``torch.functional`` function on ``torch``)."""
    for a in attrs[:-1]:
        mod = getattr(mod, a, None)
    name = getattr(mod, "__name__", "") if type(mod).__name__ == "module" else ""
    if name in _OP_MODULES:
        return True
    if name != "torch":
        return False
    fn = attrs[-1]
    return hasattr(torch._C._VariableFunctions, fn) or fn in getattr(torch.functional, "__all__", ())


def _pure(fn) -> bool:
    """Whether ``fn``'s body is pure tensor code (NOTE [A value a function returned, unnamed]); decided once per code."""
    code = fn.__code__
    v = _PURE.get(code)
    if v is not None:
        return v
    v = False
    tree = source.tree(code.co_filename)
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == code.co_name
            and n.lineno <= code.co_firstlineno <= n.body[0].lineno] if tree is not None else []
    if len(defs) == 1 and not defs[0].decorator_list:
        d = defs[0]
        local = {a.arg for a in d.args.args + d.args.posonlyargs + d.args.kwonlyargs}
        for st in d.body:
            for t in getattr(st, "targets", ()):
                local.update(e.id for e in ast.walk(t) if isinstance(e, ast.Name))
        v = all(_pure_stmt(st, local, getattr(fn, "__globals__", {})) for st in d.body)
    _PURE[code] = v
    return v


def _pure_stmt(st, local, globs) -> bool:
    if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):  # a docstring
        return True
    if isinstance(st, ast.Assign):
        if not all(isinstance(t, ast.Name) or (isinstance(t, ast.Tuple) and all(isinstance(e, ast.Name) for e in t.elts))
                   for t in st.targets):
            return False
    elif not isinstance(st, ast.Return):
        return False
    for node in ast.walk(st):
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)):
            return False
        if isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Name):
                if fn.id not in _BUILTINS_PURE or fn.id in local:
                    return False
                continue
            if not isinstance(fn, ast.Attribute) or _IMPURE.search(fn.attr):
                return False
            root, depth, attrs = fn.value, 1, [fn.attr]
            while isinstance(root, ast.Attribute):
                attrs.insert(0, root.attr)
                root, depth = root.value, depth + 1
            if not isinstance(root, ast.Name):
                if depth == 1:
                    continue  # a method of a value computed here: ``(x * x).mean(0)``
                return False
            if root.id in local:
                if depth > 1:  # ``self.fc(x)``: a module's call, with its hooks
                    return False
            else:
                if not _pure_function(globs.get(root.id), attrs):
                    return False
    return True


def returned_at(tracker, t, frame) -> dict | None:
    """``_returned`` from the program's innermost running frame at or outside ``frame`` (explain's pack hook, while
    the frame that called the function is still running)."""
    f = frame
    while f is not None and f.f_code.co_filename not in tracker.user:
        f = f.f_back
    if f is None:
        return None
    return _returned(tracker, f.f_code.co_filename, line_of(f), t, frame=f)


def _returned(tracker, file, line, data, scopes=None, frame=None) -> dict | None:
    """Where a program function called by name at ``file:line`` made ``data``, the unnamed value it returned
    (NOTE [A value a function returned, unnamed]), or None."""
    if not compat.DISPATCH_MODE_OVER_BACKWARD_SAFE or not file or not line:
        return None
    stmt = source.statement_at(file, line)
    if stmt is None:
        return None
    calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    if not calls:
        return None
    env: dict = {}
    if scopes is not None:
        for f_file, _line, scope in scopes:
            if f_file == file:
                env.update(scope)
    else:
        f = frame if frame is not None else sys._getframe(1)
        while f is not None and f.f_code.co_filename != file:
            f = f.f_back
        if f is None:
            return None
        env.update(f.f_globals)
        env.update(peek_locals(f))
    for call in calls[:4]:
        fn = env.get(call.func.id)
        code = getattr(fn, "__code__", None)
        if code is None or type(fn).__name__ != "function" or code.co_filename not in tracker.user or call.keywords \
                or not all(isinstance(a, ast.Constant) or (isinstance(a, ast.Name) and a.id in env) for a in call.args):
            continue
        if not _pure(fn):
            continue
        args = [a.value if isinstance(a, ast.Constant) else env[a.id] for a in call.args]
        if not all(a is None or isinstance(a, (_Tensor, int, float, bool)) for a in args):
            continue  # a module or any other object could bring its own effects (hooks, counters)
        found, out = _call_watched(tracker, fn, args)
        if not found or found[3] is None or not isinstance(out, _Tensor) or not _same_values(out, data):
            continue
        return {"file": found[3][0], "line": found[3][1], "op": found[0],
                "how": f"computed without autograd by {call.func.id}(), called at line {line}"}
    return None


def _call_watched(tracker, fn, args):
    """``fn(*args)`` once more under ``no_grad`` and ``_FirstMade``: (what it found, the value returned). Not while
    the program has a mode of its own on (it would see the second call's ops)."""
    try:
        if torch._C._len_torch_dispatch_stack() or torch._C._len_torch_function_stack():
            return None, None
    except Exception:
        return None, None
    mode = _FirstMade(tracker.user)
    tracker.pause()  # NOTE [Pausing the recorder] in tracker.py
    try:
        cpu_rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    except Exception:
        tracker.resume()
        return None, None
    try:
        with torch.no_grad():
            _push_mode(mode)
            try:
                out = fn(*args)
            finally:
                _pop_mode()
    except Exception:
        return None, None
    finally:
        try:  # the program's next random number is python's (NOTE [A value a function returned, unnamed])
            torch.set_rng_state(cpu_rng)
            if cuda_rng is not None:
                torch.cuda.set_rng_state_all(cuda_rng)
        finally:
            tracker.resume()
    return mode.found or None, out


def _same_values(a, b) -> bool:
    try:
        with quiet_from_modes((a, b)):
            return a.shape == b.shape and a.dtype == b.dtype and bool(
                ((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    except Exception:
        return False


#: ops that can make a NaN or an Inf from finite inputs (NOTE [An origin inside the reading line])
_CAN_MAKE = frozenset({"log", "log2", "log10", "log1p", "sqrt", "rsqrt", "div", "true_divide", "divide", "reciprocal",
                       "pow", "acos", "asin", "atanh", "acosh", "exp", "exp2", "expm1", "tan", "lgamma", "digamma",
                       "std", "var", "logit", "xlogy", "erfinv", "atan2", "fmod", "remainder", "logdet"})

# NOTE [An origin inside the reading line]
# A non-finite saved input that no node made and no name holds was computed outside autograd inside the
# very statement that read it (`torch.log(x.sum(1)) * h`, where `x` needs no gradient): an inline
# subexpression. The reading line's syntax tree is searched for the calls and operators in it that can
# make a non-finite value from finite inputs (_CAN_MAKE), other than the reading op itself; exactly one
# is named as the origin (its op, at that line). With none or several, nothing is claimed beyond the
# reading op and the line. When that one op read a name (``torch.log(p)``) whose tensor, computed outside
# autograd, is already not finite, the statement that assigned the name is the origin instead
# (``p = x / x.sum(1)`` over a blank row: ``div``), found as ``assigned`` finds a data tensor's statement.


def _inline(file, line, reader: str, recorded=frozenset()) -> dict | None:
    if not file or not line:
        return None
    tree = source.tree(file)  # parsed once per file
    if tree is None:
        return None
    found = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) != line:
            continue
        op = None
        if isinstance(node, ast.Call):
            fn = node.func
            op = fn.attr if isinstance(fn, ast.Attribute) else (fn.id if isinstance(fn, ast.Name) else None)
        elif isinstance(node, ast.BinOp):
            op = _PY_OPS.get(type(node.op))
        if op in _CAN_MAKE and op != reader and op not in recorded:
            found.add(op)
    if len(found) != 1:
        return None
    return {"file": file, "line": line, "how": "computed without autograd in the same statement", "op": found.pop()}


def _named_input_origin(tracker, made: dict, scopes=None) -> dict | None:
    """The inline op found (NOTE [An origin inside the reading line]) read a name (``torch.log(p)``, ``p.log()``)
    whose tensor, computed outside autograd, is already not finite: the origin is the statement that assigned
    it (``p = x / x.sum(1)``: ``div``), not the op that read it. None when no such name is found."""
    tree = source.tree(made["file"])
    if tree is None:
        return None
    names = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) != made["line"] or not isinstance(node, ast.Call):
            continue
        fn = node.func
        op = fn.attr if isinstance(fn, ast.Attribute) else (fn.id if isinstance(fn, ast.Name) else None)
        if op != made["op"]:
            continue
        args = list(node.args) + ([fn.value] if isinstance(fn, ast.Attribute) else [])
        names += [a.id for a in args if isinstance(a, ast.Name)]
    if not names:
        return None
    values = []
    for _file, _line, scope in scopes or ():
        values += [scope[n] for n in names if n in scope]
    if scopes is None:
        f = sys._getframe(1)
        while f is not None:
            if f.f_code.co_filename == made["file"]:
                local = peek_locals(f)
                values += [local[n] for n in names if n in local]
            f = f.f_back
    for v in values:
        if isinstance(v, _Tensor) and v.grad_fn is None and _floating(v) and _bad(v):
            found = assigned(tracker, v, scopes)
            if found is not None and found.get("op"):
                return found
    return None


def _inline_below(tracker, graph, top) -> dict | None:
    """The one op that can make a non-finite value, computed outside autograd in a statement of the program that
    made a node at or below ``top`` (NOTE [An origin inside the reading line]): for a value no saved tensor shows,
    such as ``target * (torch.log(target) - logp)`` where ``mul`` saves only ``target``."""
    below, stack, seen = [], [top], {top}
    while stack:
        s = stack.pop()
        below.append(s)
        for k in graph[s][1]:
            if k not in seen and k in graph:
                seen.add(k)
                stack.append(k)
    lines = set()
    for s in below:
        try:
            file, line = tracker.node_line(s)
        except Exception:
            continue
        if file in tracker.user and line:
            lines.add((file, line))
    in_graph = {aten_name(graph[s][0].name()) for s in below}  # ops autograd recorded: not computed outside it
    # the ops autograd recorded are left out before the count: a composite op (``torch.logdet``: slogdet, then a
    # ``where`` that writes NaN for a negative sign) is the one the line names beside recorded ones
    found = [m for m in (_inline(f, ln, None, in_graph) for f, ln in sorted(lines)) if m is not None]
    return found[0] if len(found) == 1 else None


def assignment(file, name, before, after=0) -> dict | None:
    tree = source.tree(file)  # parsed once per file
    if tree is None:
        return None
    last = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and after <= node.lineno < before and \
                any(isinstance(x, ast.Name) and x.id == name for x in node.targets):
            if last is None or node.lineno > last.lineno:
                last = node
    if last is None:
        return None
    v = last.value
    op = _PY_OPS.get(type(v.op)) if isinstance(v, ast.BinOp) else None
    if isinstance(v, ast.Call):
        fn = v.func
        op = fn.attr if isinstance(fn, ast.Attribute) else (fn.id if isinstance(fn, ast.Name) else None)
    return {"file": file, "line": last.lineno, "how": "computed without autograd", "op": op}


def root_line(file, line, op) -> tuple | None:
    """The statement that made the tensor given to ``backward()`` at ``file:line``, for a root node that saved
    nothing (``(loss * scale).backward()``: ``MulBackward0`` of a Python number keeps no tensor, so no pack hook
    heard its line): that line itself where its syntax holds the op, else the last assignment before it of the
    name ``backward()`` was called on (``loss = ...`` for ``loss.backward()``)."""
    tree = source.tree(file) if file and line else None
    if tree is None:
        return None
    receiver = None
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) != line:
            continue
        if isinstance(node, ast.BinOp) and _PY_OPS.get(type(node.op)) == op:
            return file, line
        if isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Attribute) and fn.attr == op:
                return file, line
            if isinstance(fn, ast.Attribute) and fn.attr == "backward" and isinstance(fn.value, ast.Name):
                receiver = fn.value.id
    if receiver is not None:
        made = assignment(file, receiver, line)
        if made is not None:
            return file, made["line"]
    return None


# --- the backward check -------------------------------------------------------------------------------------

class GradCheck:
    """Post hooks on one backward's nodes (NOTE [Checking each node's gradient])."""

    def __init__(self, watch):
        self.watch = watch
        self.handles: list = []
        self.birth: dict | None = None
        self.custom: dict = {}  # a custom node's sequence number -> what _FirstMade saw in its backward
        self.first = True  # the run's first backward: every node is hooked (NOTE [Gradients that may overflow])
        self.large = False  # a gradient's 2-norm passed finfo.max ** _LARGE
        self.loud = False  # this backward's loss passed finfo.max ** _LARGE (NOTE [Gradients that may overflow])
        self._in_custom = False
        self.sums = None  # grad_sums.GradSums (NOTE [Gradients the engine adds up]), set by nonfinite.ValueWatch

    def arm(self, roots) -> None:
        self.disarm()
        self.birth = None
        hook = self._post
        checks = self.watch.tracker.saved_checks
        if not any(r.device.type == "cpu" for r in roots):
            # the nodes' gradients are checked on the CPU only (a read at each node would wait for the GPU); the
            # engine's sums are queued on the device in the backwards of NOTE [Gradients that may overflow]
            # (NOTE [Sums checked on a GPU] in grad_sums.py)
            every = checks.low_precision or self.first or self.large
            self.first = self.loud = False
            if every and self.sums is not None:
                self.sums.arm(_graph(roots), device=True)
            return
        # NOTE [Which nodes' gradients are checked], NOTE [Gradients that may overflow]
        every = checks.low_precision or checks.nonfinite_saved or checks.large_saved or self.first or self.large \
            or self.loud
        self.first = self.loud = False
        graph = _graph(roots)
        for node, _ in graph.values():
            if not every and not _may_make(node):
                continue
            try:
                self.handles.append(node.register_hook(hook))
            except Exception:
                pass
        if every and self.sums is not None:
            self.sums.arm(graph)

    def note_peak(self, relative: float) -> None:
        """How close the largest gradient 2-norm at the sink after a backward came to its dtype's largest value, in
        orders of magnitude (log(norm) / log(finfo.max))."""
        if relative >= _LARGE:
            self.large = True

    def note_loss(self, value: float, dtype) -> None:
        """The finite scalar loss about to be given to backward(), read by the loss check anyway: past
        ``finfo.max ** _LARGE`` every node of this backward is hooked (NOTE [Gradients that may overflow])."""
        v = abs(value)
        if v > 1.0 and v >= _loud(dtype):
            self.loud = True

    def watching_custom(self) -> bool:
        """Whether a custom Function's backward, called now, is watched (NOTE [A custom Function's backward,
        watched while it runs])."""
        return (bool(self.handles) and self.birth is None and not self.watch.busy and not self._in_custom
                and compat.DISPATCH_MODE_OVER_BACKWARD_SAFE)

    def custom_backward(self, node, orig, args):
        """The engine's call of a custom Function's backward (``BackwardCFunction.apply``), under ``_FirstMade``."""
        if not any(_cpu_floating(a) for a in args) or not self._programs(node):
            return orig(node, *args)
        mode = _FirstMade(self.watch.tracker.user)
        self._in_custom = True
        _push_mode(mode)  # pushed directly, as the other modes of tensorscope are
        try:
            return orig(node, *args)
        finally:
            _pop_mode()
            self._in_custom = False
            if mode.found:
                if len(self.custom) < _MAX_CUSTOM:
                    self.custom[_seq(node)] = mode.found

    def _programs(self, node) -> bool:
        """Whether the Function's ``backward`` is the program's own code, not torch's (a compiled graph's
        ``CompiledFunction``, checkpoint's): only the program's is watched. Decided once per class."""
        kind = type(node)
        v = _PROGRAMS.get(kind)
        if v is None:
            try:
                fn = getattr(node._forward_cls, "backward", None)
                code = getattr(getattr(fn, "__func__", fn), "__code__", None)
                v = code is not None and code.co_filename in self.watch.tracker.user
            except Exception:
                v = False
            _PROGRAMS[kind] = v
        return v

    def disarm(self) -> None:
        self.custom.clear()
        if self.sums is not None:
            self.sums.clear()
        handles, self.handles = self.handles, []
        for h in handles:
            try:
                h.remove()
            except Exception:
                pass

    def _post(self, grad_inputs, grad_outputs):
        if self.birth is not None or self.watch.busy:
            return
        try:
            with quiet_from_modes((*grad_inputs, *grad_outputs)):  # the program's mode must not see our checks
                made = next((g for g in grad_inputs if _cpu_floating(g) and not _finite(g)), None)
                if made is None or any(_cpu_floating(g) and not _finite(g) for g in grad_outputs):
                    return
            self.birth = self._birth(torch._C._current_autograd_node(), grad_outputs, made)
        except Exception:
            pass

    def _birth(self, node, grad_outputs, made) -> dict:
        w = self.watch
        tr = w.tracker
        try:
            ffile, fline = tr.node_line(node._sequence_nr())
        except Exception:
            ffile = fline = None
        cur = tr.backward_calls.current or {}
        custom = isinstance(node, torch.autograd.function.BackwardCFunction)
        b = {"op": None, "aten": None, "node": node.name(), "phase": "backward", "file": ffile or cur.get("file"),
             "line": fline or cur.get("line"), "step": w.backward_calls, "tensor": None, "value": value_of(made),
             "dtype": str(made.dtype).replace("torch.", ""), "shape": list(made.shape), "inputs": [], "data": False,
             "intended": False, "forward_file": ffile, "forward_line": fline, "backward_file": cur.get("file"),
             "backward_line": cur.get("line"), "found_by": "node hook"}
        if custom:
            b["custom_function"] = True
            found = self.custom.pop(_seq(node), None)  # NOTE [A custom Function's backward, watched while it runs]
            if found:
                b["op"], b["aten"] = f"aten.{found[0]}", found[1]
                b["inputs"] = [dict(stats(t), tensor=tr.tid(t)) for t in found[2][:_MAX_INPUTS]]
                if found[3] is not None:
                    b["file"], b["line"] = found[3]
        elif compat.DISPATCH_MODE_OVER_BACKWARD_SAFE:
            op = _rerun(w, node, grad_outputs)
            if op is not None:
                b["op"], b["aten"] = f"aten.{op[0]}", op[1]
                for t in op[2][:_MAX_INPUTS]:
                    s = stats(t)
                    s["tensor"] = tr.tid(t)
                    b["inputs"].append(s)
        return b


# nodes whose gradient is finite when the gradients they receive and the values they saved are, but for
# overflow (NOTE [Which nodes' gradients are checked]); by the node's name without "Backward<N>"
_FINITE_GRAD = frozenset({
    "View", "UnsafeView", "Reshape", "ReshapeAlias", "Transpose", "T", "Permute", "Expand", "Squeeze", "Unsqueeze",
    "Select", "Slice", "Split", "SplitWithSizes", "Unbind", "Cat", "Stack", "Clone", "AsStrided", "Narrow", "Alias",
    "Index", "IndexSelect", "Gather", "Embedding", "Add", "Sub", "Rsub", "Neg", "Mul", "Sum", "Mean", "Mm", "Addmm",
    "Bmm", "Baddbmm", "Mv", "Dot", "Relu", "Gelu", "Silu", "Sigmoid", "Tanh", "LeakyRelu", "Hardtanh", "Softmax",
    "LogSoftmax", "NativeLayerNorm", "MaskedFill", "Where", "Clamp", "ClampMin", "ClampMax", "Abs",
})
_MAKES: dict = {}  # node type -> whether its post hook goes on
_PROGRAMS: dict = {}  # custom node type -> whether its backward is the program's code (GradCheck._programs)


def _may_make(node) -> bool:
    kind = type(node)
    v = _MAKES.get(kind)
    if v is None:
        v = _MAKES[kind] = (isinstance(node, torch.autograd.function.BackwardCFunction)
                            or _BACKWARD.sub("", node.name()) not in _FINITE_GRAD)
    return v


def _seq(node):
    try:
        return node._sequence_nr()
    except Exception:
        return id(node)


def _cpu_floating(g) -> bool:
    return _floating(g) and g.device.type == "cpu" and g.numel() > 0


def saved_sum(t) -> float:
    """The sum of a floating CPU tensor saved for backward, read with one reduction: not finite when the tensor
    holds a NaN or Inf (an overflowing sum of finite values errs towards hooking every node), past
    ``large_saved(dtype)`` when it holds values a gradient can overflow against. Called by explain's pack hook
    (saved_checks) only while values are checked: NOTE [Which nodes' gradients are checked]. Unseen by the
    program's profiler (NOTE [Our ops unseen by the program's profiler] in quiet.py)."""
    if _profiling():
        with unrecorded():
            return _TensorBase.sum(_TensorBase.detach(t)).item()
    return _TensorBase.sum(_TensorBase.detach(t)).item()


_LARGE_SAVED: dict = {}
_LOUD: dict = {}


def _loud(dtype) -> float:
    """A loss's size past which its backward is hooked at every node: ``finfo.max ** _LARGE`` (4.3e9 in float32)."""
    v = _LOUD.get(dtype)
    if v is None:
        v = _LOUD[dtype] = float(torch.finfo(dtype).max) ** _LARGE
    return v


def large_saved(dtype) -> float:
    """A saved value's size past which a float32 (float64) gradient of a listed node may overflow within the same
    backward: ``finfo.max ** 0.5`` (1.8e19 in float32), NOTE [Gradients that may overflow]."""
    v = _LARGE_SAVED.get(dtype)
    if v is None:
        v = _LARGE_SAVED[dtype] = float(torch.finfo(dtype).max) ** 0.5
    return v


def _finite(t) -> bool:
    v = t.detach().sum().item()
    if v - v == 0:
        return True
    return not _bad(t)


class _FirstMade(TorchDispatchMode):
    """Names the first op whose floating output is non-finite while its floating inputs are finite; with
    ``user`` (the program's code), also the program's line that called it (NOTE [A custom Function's
    backward, watched while it runs])."""

    def __init__(self, user=None):
        super().__init__()
        self.found = None
        self.user = user

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.found is None:
            try:
                self._look(func, args, kwargs, out)
            except Exception:
                self.found = False  # never raise into the program's backward; stop looking
        return out

    def _look(self, func, args, kwargs, out):
        outs = [o for o in (out if isinstance(out, (list, tuple)) else [out]) if _floating(o)]
        if not outs or func.overloadpacket.__name__ in MASK_OPS:  # a mask's -inf is written on purpose
            return
        ins = [a for a in list(args) + list(kwargs.values()) if _floating(a)]
        with quiet_from_modes(outs + ins):  # the program's own mode, below this one, must not see the checks
            if all(_finite(o) for o in outs) or any(_bad(a) for a in ins):
                return
            where = None
            if self.user is not None:
                f = sys._getframe(2)
                while f is not None and f.f_code.co_filename.endswith(_DISPATCH_SHIMS):
                    f = f.f_back  # torch's wrappers of __torch_dispatch__, which user_frame takes for a compiler
                uf = user_frame(f, self.user)
                if uf is not None:
                    where = (uf.f_code.co_filename, line_of(uf))
            self.found = (func.overloadpacket.__name__, str(func), [a.detach().clone() for a in ins], where)


def _rerun(watch, node, grad_outputs):
    """Run ``node`` once more on the gradients it received, under ``_FirstMade``: (op, overload, inputs)."""
    tr = watch.tracker
    tr.pause()  # NOTE [Pausing the recorder] in tracker.py
    watch.busy = True
    mode = _FirstMade()
    try:
        with torch.no_grad():
            _push_mode(mode)  # pushed directly, as the other modes of tensorscope are
            try:
                node(*grad_outputs)
            finally:
                _pop_mode()
    except Exception:
        pass
    finally:
        watch.busy = False
        tr.resume()
    return mode.found or None
