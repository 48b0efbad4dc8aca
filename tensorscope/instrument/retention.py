"""Who keeps it alive: reference paths from the program's names to its tensors, storages and graph nodes.

NOTE [Retention walks]
A retention walk starts at the program's names (its globals, and the locals of its frames) and goes
breadth-first through what holds what, the way a PyTorch user would say it: containers (``[17]``,
``['k']``), attributes of modules and of the program's own objects (``.h``), closures and hook dicts
(``._forward_hooks[3]``, a hook's captured ``acts``), the autograd graph (``.grad_fn``,
``next_functions``, saved tensors read through ``_raw_saved_*``, a custom Function's ``ctx``), a
view's ``._base``, a leaf's ``.grad`` and optimizer state. ``gc`` does not see what only the
autograd graph holds, and ``gc.get_referrers`` would run a full pass over the heap, so the walk goes
forward from the names, by type, and never calls the collector.

It never runs the program's code: types are checked with ``type()``, attributes read from an
instance's ``__dict__`` (no ``getattr`` on the program's objects, so no property or ``__getattr__``
runs), and only dicts, lists, tuples, sets, functions, modules, optimizers and instances of the
program's own classes are entered. It is bounded: at most ``budget`` objects are visited, and the
walk says when it stopped early. It keeps nothing: the objects it visits are held only while it runs
(so no ``id`` is reused meanwhile), and what it returns is plain data (storage addresses, byte
counts, labels).

It is made for a training loop's step boundaries, where it runs a dozen times: an empty list, tuple,
dict or set (a module has a dozen empty hook dicts) is not entered, as it holds nothing; and a step's
label (``[17]``, ``.grad_fn MmBackward0``) is made only when a path is read (``Walk.step``), since a
walk takes thousands of steps and reads a few paths. On the GPT benchmark this took one growth sample
from about 7 ms to under 5 (benchmarks/RESULTS.md).

Each storage is attributed to the first name it is reached from (breadth-first: the shortest path),
so a parameter reached from ``model`` at depth 2 is not counted again under ``history`` through the
graph.
"""

from __future__ import annotations

import collections
import sys
import types

import torch

from tensorscope.holder_path import json_steps, text
from tensorscope.instrument.frames import peek_locals
from tensorscope.instrument.recorder import node_name, storage_key

_Tensor = torch.Tensor
_Module = torch.nn.Module
_Optimizer = torch.optim.Optimizer
_CO_OPTIMIZED = 0x0001
_ATOMS = (str, bytes, int, float, bool, complex, type(None), type, range, slice)
_ATOM_TYPES = frozenset(_ATOMS)
# containers whose emptiness is read without running the program's code: an empty one holds nothing
_EMPTY_SKIPPED = frozenset({dict, list, tuple, set, frozenset, collections.OrderedDict, collections.defaultdict})
_USER_TYPES: dict = {}  # type -> whether it is one of the program's own classes
_HAS_DICT: dict = {}  # type -> whether its instances may have a __dict__ (see _instance_dict)
_KINDS: dict = {}  # type -> what Walk._children reads of its instances (Walk._kind)
(_K_NONE, _K_TENSOR, _K_DICT, _K_SEQUENCE, _K_SET, _K_NODE, _K_MODULE, _K_FUNCTION, _K_METHOD, _K_PYMODULE, _K_CELL,
 _K_OBJECT, _K_PARTIAL) = range(13)

# Module attributes that hold hooks: the walk names them as PyTorch's register_* calls do.
HOOK_DICTS = frozenset({"_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
                        "_forward_hooks_with_kwargs", "_state_dict_hooks", "_load_state_dict_pre_hooks"})
# Module attributes whose entries read as attributes (`model.fc.weight`, not `model._modules['fc']`).
_AS_ATTRIBUTES = frozenset({"_parameters", "_buffers", "_modules"})


# NOTE [A graph node's visit]
# A walk at a step boundary (a growth sample, NOTE [Sampling growth] in growth.py) reaches the graph of the loss
# just backwarded: in a small GPT, about 270 of its 720 objects are graph nodes, and their visits were the
# largest part of its time. What a node's visit reads depends on its type alone (its ``_raw_saved_*`` names,
# whether it is an AccumulateGrad, whether its instances can carry a ``__dict__``: a custom Function's ctx), so that is
# decided once a type (``_NODE_TYPES``), and the node's children are made as one list, with no generator frame
# resumed per child (two before: ``_children`` and ``_node``). Tensors and modules, the next most common, are
# read the same way (``_tensor``, ``_module``); ``_run`` picks the three by the type's kind. The children and
# their order are those of before, and an exception part-way keeps the ones made before it, as the generators
# did (``_run`` queued those before it caught the exception). A GPT's walk at a boundary: benchmarks/RESULTS.md,
# "Run's cost (speed14, 2026-11-26)".
_NODE_TYPES: dict = {}  # node type -> (((attribute, saved name), ...), is an AccumulateGrad, may have a __dict__)


def _node_type(cls) -> tuple:
    try:
        names = tuple(n for n in dir(cls) if n.startswith("_raw_saved_"))
    except Exception:
        names = ()
    has_dict = _HAS_DICT.get(cls)
    if has_dict is None:
        has_dict = _HAS_DICT[cls] = _may_have_dict(cls)
    return (tuple((n, n[len("_raw_saved_"):]) for n in names), cls.__name__ == "AccumulateGrad", bool(has_dict))


class Walk:
    """One bounded breadth-first walk (see NOTE [Retention walks]).

    After :meth:`run`: ``storages`` maps a storage address to ``(nbytes, root index, id of the tensor
    that first reached it)``; ``nodes`` counts graph nodes per root; :meth:`path` gives the labels from
    a root to an object still known to the walk. Call :meth:`release` before the program resumes.

    Each object reached is one entry of ``_seen``: ``id -> (object, id of its parent, step, root index)``,
    one dict and a tuple an object rather than three dicts (the end-of-run walk of 5,000 parameters
    reaches 50,000 objects, and it is the run's peak memory: benchmarks/RESULTS.md, "Peak memory
    (mem13, 2026-11-26 evening)").
    """

    def __init__(self, user, budget: int = 50_000, storage_sizes: bool = False, watch: frozenset = frozenset()):
        self.user = user
        self.watch = watch  # sequence nrs of graph nodes to find (a failing backward's freed nodes)
        self.hits: list[int] = []  # ids of watched nodes reached, in breadth-first order
        self.budget = budget
        self.storage_sizes = storage_sizes  # the real storage size (makes Python storage objects: end of run)
        self.visited = 0
        self.truncated = False
        self._seen: dict[int, tuple] = {}  # id -> (object, parent id, step, root index), held only during the walk
        self.named: set[int] = set()  # ids of the objects bound to the roots' names
        self.roots: list[dict] = []
        self.storages: dict[int, tuple] = {}
        self.nodes: dict[int, int] = {}  # root index -> graph nodes reached first from it
        self.first_tensor: dict[int, int] = {}  # root index -> id of the largest tensor reached from it
        self._biggest: dict[int, int] = {}
        self.first_node: dict[int, int] = {}  # root index -> id of the first graph node reached from it
        # root index -> the smallest sequence nr of a graph node (not an AccumulateGrad) reached first from it:
        # how old the graph it holds is (NOTE [A graph kept across steps holds an older node] in growth.py)
        self.oldest: dict[int, int] = {}

    # --- the walk ------------------------------------------------------------------------

    def run(self, roots) -> "Walk":
        """``roots``: (name, object, where) triples in the order names are preferred.

        Names bound to modules are walked first (a parameter belongs to its model, not to the
        optimizer that also reaches it), then containers and other objects, then bare tensors: a
        tensor kept in ``model.h`` (or ``history[-1]``) and also bound to ``out`` is found through what
        keeps it across steps.
        """
        roots = list(roots)
        self._run([r for r in roots if issubclass(type(r[1]), _Module)])
        self._run([r for r in roots if not issubclass(type(r[1]), (_Module, _Tensor))])
        return self._run([r for r in roots if issubclass(type(r[1]), _Tensor)])

    def _run(self, roots) -> "Walk":
        queue: list = []  # keys of _seen in the order reached (the key's own int, shared by the children's entries)
        seen = self._seen
        for name, obj, where in roots:
            if issubclass(type(obj), _ATOMS):
                continue
            self.named.add(id(obj))
            if id(obj) in seen:
                continue
            i = len(self.roots)
            self.roots.append({"name": name, "type": type(obj).__name__, "where": where})
            k = id(obj)
            seen[k] = (obj, None, {"via": "name", "label": name, "type": type(obj).__name__}, i)
            queue.append(k)
        head = 0
        atoms, empty = _ATOM_TYPES, _EMPTY_SKIPPED
        kinds, push = _KINDS, queue.append
        of_node, of_tensor, of_module, of_other = self._node, self._tensor, self._module, self._children
        visited, budget = self.visited, self.budget  # (read by nothing else while the walk runs)
        while head < len(queue):
            if visited >= budget:
                self.truncated = True
                break
            k0 = queue[head]
            obj, _, _, r = seen[k0]
            head += 1
            visited += 1
            try:
                # a graph node's, a tensor's and a module's children as a list: NOTE [A graph node's visit]
                kind = kinds.get(type(obj))
                if kind == _K_NODE:
                    kids = of_node(obj, r)
                elif kind == _K_TENSOR:
                    kids = of_tensor(obj, r)
                elif kind == _K_MODULE:
                    kids = of_module(obj)
                else:
                    kids = of_other(obj, r)
                for step, child in kids:
                    tc = type(child)
                    if tc in atoms or tc in empty and not child:  # an empty list or dict holds nothing
                        continue
                    k = id(child)
                    if k in seen:
                        continue
                    seen[k] = (child, k0, step, r)
                    push(k)
            except Exception:  # a surprising object loses its children, never the run
                continue
        self.visited = visited
        del queue
        return self

    def _children(self, obj, r):
        """(step, child) pairs; a step is ``(via, format, argument)``, its label made only when a path is
        read (see ``step``): a walk makes thousands of steps and reads a few paths. Which of the kinds below
        an object is depends on its type alone, decided once a type (``_kind``)."""
        cls = type(obj)
        kind = _KINDS.get(cls)
        if kind is None:
            kind = _KINDS[cls] = self._kind(cls)
        if kind == _K_NODE:
            yield from self._node(obj, r)  # (``_run`` reads these three lists itself once the type is known)
        elif kind == _K_TENSOR:
            yield from self._tensor(obj, r)
        elif kind == _K_DICT:
            for k, v in list(dict.items(obj)):
                yield ("item", _key_label, k), v
        elif kind == _K_SEQUENCE:
            for i, v in enumerate(list(obj) if cls is not tuple else obj):
                yield ("item", _index_label, i), v
        elif kind == _K_SET:
            for v in list(obj):
                yield ("item", None, "{...}"), v
        elif kind == _K_MODULE:
            yield from self._module(obj)
        elif kind == _K_FUNCTION:
            yield from self._function(obj)
        elif kind == _K_METHOD:
            yield ("attr", None, ".__self__"), obj.__self__
            yield ("attr", None, ".__func__"), obj.__func__
        elif kind == _K_PYMODULE:
            if obj.__dict__.get("__file__") in self.user:
                for k, v in list(obj.__dict__.items()):
                    if not (k.startswith("__") and k.endswith("__")):
                        yield ("attr", _attr_label, k), v
        elif kind == _K_CELL:
            try:
                yield ("closure", None, ""), obj.cell_contents
            except ValueError:
                pass
        elif kind == _K_OBJECT:
            d = _instance_dict(obj)
            state = issubclass(cls, _Optimizer)
            for k, v in list(d.items()):
                yield ("optimizer_state" if state and k == "state" else "attr", _attr_label, k), v
            for k in _slot_names(cls):
                try:
                    yield ("attr", _attr_label, k), object.__getattribute__(obj, k)
                except AttributeError:
                    pass
        elif kind == _K_PARTIAL:
            for i, v in enumerate(obj.args):
                yield ("item", None, f".args[{i}]"), v
            for k, v in (obj.keywords or {}).items():
                yield ("item", None, f".keywords[{k!r}]"), v

    def _kind(self, cls) -> int:
        """Which of ``_children``'s kinds the instances of ``cls`` are (the first that fits, in this order)."""
        if issubclass(cls, _Tensor):
            return _K_TENSOR
        if issubclass(cls, dict):
            return _K_DICT
        if issubclass(cls, (list, tuple)):
            return _K_SEQUENCE
        if issubclass(cls, (set, frozenset)):
            return _K_SET
        if hasattr(cls, "next_functions"):
            return _K_NODE
        if issubclass(cls, _Module):
            return _K_MODULE
        if cls is types.FunctionType:
            return _K_FUNCTION
        if cls is types.MethodType:
            return _K_METHOD
        if cls is types.ModuleType:
            return _K_PYMODULE
        if cls is types.CellType:
            return _K_CELL
        if issubclass(cls, _Optimizer) or self._user_type(cls) or _tensorscope_packed(cls):
            return _K_OBJECT
        if cls.__module__ == "functools" and cls.__name__ == "partial":
            return _K_PARTIAL
        return _K_NONE

    def _user_type(self, cls) -> bool:
        verdict = _USER_TYPES.get(cls)
        if verdict is None:
            mod = sys.modules.get(getattr(cls, "__module__", None) or "")
            file = getattr(mod, "__file__", None) if mod is not None else None
            verdict = bool(file) and file in self.user
            if cls.__module__ == "__main__":
                verdict = True
            _USER_TYPES[cls] = verdict
        return verdict

    def _tensor(self, t, r) -> list:
        out = []
        try:
            self._count(t, r)
            gf = t.grad_fn
            if gf is not None:
                out.append((_GRAD_FN_STEP, gf))
            base = t._base
            if base is not None:
                out.append((_BASE_STEP, base))
            if t.is_leaf:
                g = t.grad
                if g is not None:
                    out.append((_GRAD_STEP, g))
                hooks = t._backward_hooks
                if hooks:
                    for k, v in list(hooks.items()):
                        out.append((("hook", None, f"._backward_hooks[{k}]"), v))
        except Exception:  # the pairs made so far are kept (NOTE [A graph node's visit])
            pass
        return out

    def _count(self, t, r) -> None:
        try:
            key = storage_key(t)
        except Exception:
            return
        if key in self.storages or not key:
            return
        try:
            if self.storage_sizes:
                nbytes = t.untyped_storage().nbytes()
            else:
                base = t._base
                src = base if base is not None else t
                nbytes = src.numel() * src.element_size()
        except Exception:
            return
        self.storages[key] = (nbytes, r, id(t))
        best = self._biggest.get(r, -1)
        if nbytes > best:
            self._biggest[r] = nbytes
            self.first_tensor[r] = id(t)

    def _node(self, node, r) -> list:
        """A graph node's (step, child) pairs, in the order a walk queues them: its saved tensors, the variable
        of an AccumulateGrad, a custom Function's ctx attributes, the next nodes. A list, not a generator (see
        NOTE [A graph node's visit]); an exception part-way keeps the pairs made before it, as a generator
        interrupted there would."""
        out = []
        try:
            nodes = self.nodes
            nodes[r] = nodes.get(r, 0) + 1
            if r not in self.first_node:
                self.first_node[r] = id(node)
            if self.watch and node._sequence_nr() in self.watch:
                self.hits.append(id(node))
            cls = type(node)
            info = _NODE_TYPES.get(cls)
            if info is None:
                info = _NODE_TYPES[cls] = _node_type(cls)
            saved, accumulates, has_dict = info
            if not accumulates:  # AccumulateGrad's sequence nr is not its creation's (UINT64_MAX on newer torch)
                seq = node._sequence_nr()
                oldest = self.oldest.get(r)
                if oldest is None or seq < oldest:
                    self.oldest[r] = seq
            append = out.append
            for name, what in saved:
                try:
                    raw = getattr(node, name)
                except Exception:
                    continue
                if issubclass(type(raw), (tuple, list)):
                    for i, sv in enumerate(raw):
                        try:
                            data = sv.data
                        except Exception:
                            continue
                        if data is not None:
                            label = f"saved `{what}`" if len(raw) == 1 else f"saved `{what}[{i}]`"
                            append((("saved", None, label), data))
                else:
                    try:
                        data = raw.data
                    except Exception:
                        continue
                    if data is not None:
                        append((("saved", None, f"saved `{what}`"), data))
            if accumulates:
                try:
                    variable = node.variable
                except Exception:
                    variable = None
                if variable is not None:
                    append((_VARIABLE_STEP, variable))
            if has_dict:
                for k, v in list(_instance_dict(node).items()):  # a custom Function's ctx attributes (`ctx.x = ...`)
                    append((("ctx", None, f"ctx.{k}"), v))
            for nxt, _ in node.next_functions:
                if nxt is not None:
                    append((_NEXT_STEP, nxt))
        except Exception:
            pass
        return out

    def _module(self, m) -> list:
        out = []
        try:
            append = out.append
            for k, v in list(_instance_dict(m).items()):
                if k in _AS_ATTRIBUTES and issubclass(type(v), dict):
                    for name, sub in list(dict.items(v)):
                        if sub is not None:
                            append((("attr", _attr_label, name), sub))
                elif k in HOOK_DICTS and issubclass(type(v), dict):
                    for hid, hook in list(dict.items(v)):
                        append((("hook", None, f".{k}[{hid}]"), hook))
                elif not issubclass(type(v), _ATOMS):
                    append((("attr", _attr_label, k), v))
        except Exception:  # the pairs made so far are kept (NOTE [A graph node's visit])
            pass
        return out

    def _function(self, fn):
        if fn.__code__.co_filename not in self.user:
            return
        cells = fn.__closure__ or ()
        for name, cell in zip(fn.__code__.co_freevars, cells):
            try:
                yield ("closure", None, f"closure `{name}`"), cell.cell_contents
            except ValueError:
                pass
        for i, v in enumerate(fn.__defaults__ or ()):
            yield ("closure", None, f"default {i}"), v

    # --- results -------------------------------------------------------------------------

    def step(self, obj_id: int) -> tuple:
        """(id of the parent, the step from it as a dict: ``via``, ``label``, ``seq`` of a ``grad_fn``) of an
        object the walk reached; ``(None, {})`` for one it did not."""
        entry = self._seen.get(obj_id)
        if entry is None:
            return None, {}
        child, parent, step, _ = entry
        if type(step) is dict:
            return parent, step
        via, fmt, arg = step
        if fmt is None:
            return parent, {"via": via, "label": arg}
        out = {"via": via, "label": fmt(arg, child)}
        if fmt is _grad_fn_label:
            out["seq"] = child._sequence_nr()
        return parent, out

    def label(self, obj_id: int) -> tuple:
        """(id of the parent, the step's label) of an object the walk reached, ``(None, None)`` for one it did not:
        ``step`` without its dict (a growth sample reads this of every storage, NOTE [Storage identity across
        samples] in growth.py)."""
        entry = self._seen.get(obj_id)
        if entry is None:
            return None, None
        child, parent, step, _ = entry
        if type(step) is dict:
            return parent, step.get("label")
        via, fmt, arg = step
        return parent, (arg if fmt is None else fmt(arg, child))

    def path(self, obj_id: int) -> list[dict]:
        """The steps from a root to an object the walk reached (plain data)."""
        steps = []
        k = obj_id
        while k is not None and len(steps) <= self.visited:
            parent, step = self.step(k)
            steps.append(step)
            k = parent
        steps.reverse()
        if len(steps) > 24:  # a long chain of graph nodes: the name end and the tensor end are what matter
            steps = steps[:12] + [{"via": "skip", "label": f"... {len(steps) - 20} more"}] + steps[-8:]
        return steps

    def obj(self, obj_id: int):
        entry = self._seen.get(obj_id)
        return entry[0] if entry is not None else None

    def reached(self, obj_id: int) -> bool:
        """Whether the walk reached the object of this id (while it holds what it reached)."""
        return obj_id in self._seen

    def parent(self, obj_id: int) -> int | None:
        """The id of the object the walk reached this one from (None for a root or one not reached)."""
        entry = self._seen.get(obj_id)
        return entry[1] if entry is not None else None

    def root(self, obj_id: int) -> int | None:
        """The index in ``roots`` of the root this object was reached from (None if not reached)."""
        entry = self._seen.get(obj_id)
        return entry[3] if entry is not None else None

    def root_bytes(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for nbytes, r, _ in self.storages.values():
            out[r] = out.get(r, 0) + nbytes
        return out

    def release(self) -> None:
        """Drop every object the walk held (before the program resumes)."""
        self._seen.clear()


def _key_label(k, _child=None) -> str:
    if issubclass(type(k), (str, int, float, bool)) or k is None:
        return f"[{k!r}]"
    if issubclass(type(k), _Tensor):
        return "[<tensor>]"
    return f"[<{type(k).__name__}>]"


def _index_label(i, _child) -> str:
    return f"[{i}]"


def _attr_label(name, _child) -> str:
    return f".{name}"


def _grad_fn_label(_, node) -> str:
    return f".grad_fn {node_name(node)}"


def _node_label(_, node) -> str:
    return node_name(node)


# the steps that need no argument (see ``Walk.step``)
_GRAD_FN_STEP = ("grad_fn", _grad_fn_label, None)
_NEXT_STEP = ("next", _node_label, None)
_BASE_STEP = ("base", None, "._base")
_GRAD_STEP = ("grad", None, ".grad")
_VARIABLE_STEP = ("variable", None, ".variable")


def _instance_dict(obj) -> dict:
    cls = type(obj)
    verdict = _HAS_DICT.get(cls)
    if verdict is None:
        verdict = _HAS_DICT[cls] = _may_have_dict(cls)
    if not verdict:  # a C++ autograd node: asking raises, and the exception costs most of a node's visit
        return {}
    try:
        d = object.__getattribute__(obj, "__dict__")
    except Exception:
        return {}
    return d if type(d) is dict else {}


def _may_have_dict(cls) -> bool:
    """Whether instances of ``cls`` can have a ``__dict__``: no instance dict slot and no class in its
    MRO that defines ``__dict__`` means ``object.__getattribute__(obj, "__dict__")`` raises."""
    try:
        return cls.__dictoffset__ != 0 or any("__dict__" in vars(k) for k in cls.__mro__)
    except Exception:
        return True


def _slot_names(cls) -> tuple:
    out = []
    for k in getattr(cls, "__mro__", ()):
        slots = k.__dict__.get("__slots__") if hasattr(k, "__dict__") else None
        if issubclass(type(slots), str):
            slots = (slots,)
        for s in slots or ():
            if s not in ("__dict__", "__weakref__"):
                out.append(s)
    return tuple(out)


def _tensorscope_packed(cls) -> bool:
    """tensorscope's own packed saved tensor (explain's hooks): its ``tensor`` is the saved one."""
    return (getattr(cls, "__module__", "") or "").startswith("tensorscope.instrument.saved")


def frame_roots(frame, user) -> list:
    """Roots from the program's running frames, innermost first: ``(name, value, where)``.

    A running function's locals are copied with ``peek_locals``, which leaves no snapshot on the frame
    (NOTE [Locals of a running frame]); the caller drops the roots once the walk has read them.
    """
    roots = []
    seen_globals = set()
    f = frame
    while f is not None:
        code = f.f_code
        if code.co_filename in user:
            optimized = code.co_flags & _CO_OPTIMIZED
            try:
                scope = peek_locals(f) if optimized else f.f_locals
            except Exception:
                scope = None
            if issubclass(type(scope), dict) and id(scope) not in seen_globals:
                fn = code.co_name
                if optimized:
                    where = f"{fn}()"
                else:
                    seen_globals.add(id(scope))
                    where = "global"
                for name, value in list(scope.items()):
                    if issubclass(type(name), str) and not (name.startswith("__") and name.endswith("__")):
                        roots.append((name, value, where))
            g = f.f_globals
            if id(g) not in seen_globals and code.co_flags & _CO_OPTIMIZED:
                seen_globals.add(id(g))
                for name, value in list(g.items()):
                    if issubclass(type(name), str) and not (name.startswith("__") and name.endswith("__")):
                        roots.append((name, value, "global"))
        f = f.f_back
    return roots


MAX_HOLDERS = 10
# a view pins its storage when the storage is at least PIN_RATIO times the bytes it reaches and PIN_MIN_BYTES
PIN_RATIO = 4
PIN_MIN_BYTES = 1 << 20
MAX_PATHS = 5_000
END_BUDGET = 100_000


def exception_roots(main_globals, exc, user) -> list:
    """Roots at the end of a run: the program's globals, then the locals of its frames in the traceback."""
    roots = []
    if main_globals is not None:
        for name, value in list(main_globals.items()):
            if issubclass(type(name), str) and not (name.startswith("__") and name.endswith("__")):
                roots.append((name, value, "global"))
    tb = exc.__traceback__ if exc is not None else None
    while tb is not None:
        frame = tb.tb_frame
        code = frame.f_code
        if code.co_filename in user and code.co_name != "<module>":
            try:
                scope = dict(frame.f_locals)
            except Exception:
                scope = {}
            for name, value in scope.items():
                if issubclass(type(name), str):
                    roots.append((name, value, f"{code.co_name}()"))
        tb = tb.tb_next
    return roots


def held(tracker, main_globals, exc, growth=None) -> dict:
    """The ``memory`` object of the report: the top holders of memory by bytes at the end of the run
    (or at the uncaught exception), each with its path; live views that pin a much larger storage.
    ``held_walk`` then ``HeldWalk.finish``: the end of a run calls the two around its snapshot (NOTE [The
    end-of-run walk before the snapshot])."""
    return held_walk(tracker, main_globals, exc, growth).finish(tracker)


# NOTE [The end-of-run walk before the snapshot]
# The end-of-run walk reaches every object the program's names hold (50,000 on a model of 5,000 parameters
# trained with Adam) and its tables (``Walk._seen``, ``storages``) are the largest thing the end of a run
# builds while it lasts; the snapshot (snapshot.take) is the largest thing it keeps. Run after the snapshot,
# the walk's tables came on top of it: the run's peak memory. So the walk runs first (``held_walk``), keeps
# what the report needs of it as plain data (paths, byte counts) plus the few tensors whose ids it names,
# and is released; the snapshot is then built in the memory the walk gave back, and ``HeldWalk.finish``
# numbers those tensors afterwards, in the order ``held`` numbered them when it ran after the snapshot
# (its holders' largest tensors, then the pinned views and their bases, then the paths of the tracked
# tensors in the id table's order), so the report is the same (benchmarks/RESULTS.md, "mem15,
# 2026-11-26"). The paths are kept for the first MAX_PATHS tracked tensors the walk reached, in the id
# table's order; when fewer are tracked before the snapshot, for every tensor reached (the snapshot
# tracks the tensors it names next, and which of those the walk reached is only known then). Those
# tensors are held until ``finish`` (the program has ended; they were reached from its names).


class HeldWalk:
    """What the end-of-run walk found, before the tensors it names have ids (see NOTE [The end-of-run walk
    before the snapshot]); ``finish`` gives the ``memory`` object."""

    def __init__(self, doc, holders, pinned, paths, growth):
        self.doc = doc  # the memory object, its tensor ids still to fill
        self.holders = holders  # (holder entry, its largest tensor or None)
        self.pinned = pinned  # (view, base, path, bytes reached, storage bytes)
        self.paths = paths  # id(tensor) -> (tensor, path)
        self.growth = growth

    def finish(self, tracker) -> dict:
        for entry, t in self.holders:
            if "tensor" in entry and t is not None:
                entry["tensor"] = tracker.note_tensor(t)
        pinned = []
        for t, base, path, reach, nbytes in self.pinned:
            tid = tracker.note_tensor(t)
            c = tracker.tensor_created.get(tid) or {}
            made = tracker.tensor_created.get(tracker.tid(base)) or {}  # the pinned memory: where its base was made
            if made.get("file") not in tracker.user:
                made = c
            pinned.append({"tensor": tid, "path": path, "nbytes": reach, "storage_nbytes": nbytes,
                           "file": c.get("file"), "line": c.get("line"), "how": c.get("how"),
                           "alloc": {"file": made["file"], "line": made["line"], "how": made.get("how")}
                           if made.get("line") else None})
        paths = {}  # tid -> the path that holds it, for the tensors tracked in the run (`--tensor NAME`)
        found = self.paths
        for tid, t in tracker.iter_live():
            p = found.get(id(t))
            if p is not None and p[0] is t and len(paths) < MAX_PATHS:
                paths[tid] = p[1]
        self.holders = self.pinned = self.paths = found = None
        doc, growth = self.doc, self.growth
        out = {"device": doc["device"], "total_bytes": doc["total_bytes"], "storages": doc["storages"],
               "holders": doc["holders"], "pinned_views": pinned, "paths": paths, "visited": doc["visited"],
               "truncated": doc["truncated"], "cuda_allocated": _cuda_allocated(), "cuda_blocks": doc["cuda_blocks"]}
        if growth is not None:
            out["sampled_steps"] = [s["step"] for s in growth.samples]
            out["sample_seconds"] = round(growth.seconds, 4)
        return out


def held_walk(tracker, main_globals, exc, growth=None) -> HeldWalk:
    """The end-of-run walk, released before it returns (see NOTE [The end-of-run walk before the snapshot])."""
    walk = Walk(tracker.user, budget=END_BUDGET, storage_sizes=True)
    try:
        walk.run(exception_roots(main_globals, exc, tracker.user))
        rb = walk.root_bytes()
        holders = []
        for r, info in enumerate(walk.roots):
            nbytes = rb.get(r, 0)
            if not nbytes and not walk.nodes.get(r):
                continue
            entry = {"name": info["name"], "where": info["where"], "type": info["type"], "bytes": nbytes,
                     "graph_nodes": walk.nodes.get(r, 0), "tensors": 0, "path": None, "tensor": None}
            holders.append((nbytes, r, entry))
        counts: dict[int, int] = {}
        for _, r, _ in walk.storages.values():
            counts[r] = counts.get(r, 0) + 1
        holders.sort(key=lambda h: (-h[0], h[1]))
        out = []
        later = []  # (entry, its largest tensor): numbered by finish()
        for nbytes, r, entry in holders[:MAX_HOLDERS]:
            entry["tensors"] = counts.get(r, 0)
            big = walk.first_tensor.get(r)
            if big is not None:
                steps = walk.path(big)
                entry["path"] = json_steps(steps)
                t = walk.obj(big)
                later.append((entry, t if issubclass(type(t), _Tensor) else None))
                entry["graph"] = any(s.get("via") in ("grad_fn", "saved", "next") for s in steps)
            out.append(entry)
        pinned = _pinned_views(walk)
        steps: dict = {}  # (via, label) -> one step dict shared by every path through it: 5,000 paths of a
        # model go through a few hundred distinct steps, and they are made while the walk's tables are held
        paths: dict = {}
        tracked = [t for t in tracker.live_tensors().values() if walk.reached(id(t))]
        if len(tracked) >= MAX_PATHS:  # the first MAX_PATHS in the id table's order are the ones written
            del tracked[MAX_PATHS:]
        else:  # the snapshot tracks more, in an order known only then: every tensor reached
            tracked = [e[0] for e in walk._seen.values() if issubclass(type(e[0]), _Tensor)]
        for t in tracked:
            paths[id(t)] = (t, [steps.setdefault((s["via"], s["label"]), s) for s in json_steps(walk.path(id(t)))])
        del tracked
        total = sum(nbytes for nbytes, _, _ in walk.storages.values())
        doc = {"device": "cpu", "total_bytes": total, "storages": len(walk.storages), "holders": out,
               "visited": walk.visited, "truncated": walk.truncated, "cuda_blocks": cuda_blocks(walk)}
        return HeldWalk(doc, later, pinned, paths, growth)
    finally:
        walk.release()


def _pinned_views(walk) -> list:
    """Live views whose storage is at least PIN_RATIO times the bytes they reach and PIN_MIN_BYTES:
    (view, base, path, bytes reached, storage bytes), numbered by ``HeldWalk.finish``."""
    out = []
    for key, (nbytes, r, tid_obj) in walk.storages.items():
        if nbytes < PIN_MIN_BYTES:
            continue
        t = walk.obj(tid_obj)
        try:
            base = t._base
            if base is None:
                continue
            if id(base) in walk.named or (walk.parent(id(base)) if walk.reached(id(base)) else id(t)) != id(t):
                continue  # the base is held by a name (or through another path): the view pins nothing more
            reach = t.numel() * t.element_size()
        except Exception:
            continue
        if nbytes < PIN_RATIO * max(reach, 1):
            continue
        out.append((t, base, json_steps(walk.path(tid_obj)), reach, nbytes))
        if len(out) >= 32:
            break
    return out


def _cuda_allocated():
    try:
        if torch.cuda.is_initialized() and torch.cuda.is_available():
            return int(torch.cuda.memory_allocated())
    except Exception:
        pass
    return None


MAX_CUDA_BLOCKS = 20


def cuda_blocks(walk) -> list | None:
    """The allocated blocks of ``torch.cuda.memory._snapshot()``, largest first, each named by the path
    that holds the storage starting at it (None where CUDA is not in use). See NOTE [Naming CUDA blocks]."""
    try:
        if not (torch.cuda.is_initialized() and torch.cuda.is_available()):
            return None
        snap = torch.cuda.memory._snapshot()
    except Exception:
        return None
    starts = {}
    for _key, (_nbytes, _r, tid) in walk.storages.items():
        t = walk.obj(tid)
        try:
            if t.is_cuda:
                starts[(t.device.index, t.untyped_storage().data_ptr())] = json_steps(walk.path(tid))
        except Exception:
            continue
    return name_blocks(snap, starts)


def name_blocks(snapshot: dict, starts: dict) -> list:
    """Plain data: ``snapshot`` as ``torch.cuda.memory._snapshot()`` gives it (segments with an address
    and blocks in address order), ``starts``: (device, storage data_ptr) -> path steps (NOTE [Holder path steps])."""
    out = []
    for seg in snapshot.get("segments") or ():
        addr, device = seg.get("address", 0), seg.get("device")
        for b in seg.get("blocks") or ():
            size = b.get("size", 0)
            if b.get("state") == "active_allocated":
                path = starts.get((device, addr))
                out.append({"device": device, "bytes": size, "requested_bytes": b.get("requested_size", size),
                            "path": path, "name": text(path) if path else None})
            addr += size
    out.sort(key=lambda b: -b["bytes"])
    return out[:MAX_CUDA_BLOCKS]


# NOTE [Naming CUDA blocks]
# The caching allocator's snapshot lists segments (cudaMalloc'd ranges) and, in address order, the
# blocks carved from them, with sizes and states but no names. A tensor's storage starts at the
# block it was allocated in, so a block whose start is the `data_ptr()` of a storage the retention
# walk reached is named by that storage's path (`model -> .fc -> .weight`, `history -> [3]`); a block
# nobody reachable from the program's names starts is left unnamed (held by the graph of a running
# backward, by a C++ cache, or freed by the program but not yet by a stream). The end-of-run walk (and
# the walk at an uncaught exception, torch.OutOfMemoryError included) fills `memory.cuda_blocks`.


def holders_of(target, frame, user, budget: int = END_BUDGET) -> list[list[dict]]:
    """The paths from the program's names (the frames from ``frame`` outwards) to ``target``'s storage."""
    try:
        key = storage_key(target)
    except Exception:
        key = None
    roots = frame_roots(frame, user)
    walk = Walk(user, budget=budget)
    named = [r for r in roots if r[1] is target]  # every name bound to it, besides the walk's one path
    try:
        with torch._C.DisableTorchFunction():
            walk.run(roots)
            roots = None
            found = [[{"via": "name", "label": name, "type": type(obj).__name__}]
                     for name, obj, _ in named if obj is target]
            if walk.reached(id(target)):
                found.append(walk.path(id(target)))
            if key is not None and key in walk.storages and walk.storages[key][2] != id(target):
                found.append(walk.path(walk.storages[key][2]))
            out, seen = [], set()
            for p in found:
                text = tuple(s.get("label") for s in p)
                if text not in seen:
                    seen.add(text)
                    out.append(p)
            return out
    finally:
        named = None
        walk.release()


def carried_holders(frame, user, freed_seqs, exclude=()) -> list[dict]:
    """Names from which a failing backward's freed nodes are reached: state carried across iterations
    (``hidden``, ``model.h``, a list). ``exclude``: the failing call's own roots. Modules, containers and
    objects are walked before bare tensors, so a tensor kept in ``model.h`` and also bound to ``out`` is
    found through ``model.h``. Shortest paths first; plain data."""
    roots = frame_roots(frame, user)
    skip = {id(t) for t in exclude}
    roots = [r for r in roots if id(r[1]) not in skip]
    walk = Walk(user, budget=END_BUDGET, watch=frozenset(freed_seqs))
    try:
        with torch._C.DisableTorchFunction():
            walk.run(roots)
        roots = None
        out, seen = [], set()
        for hit in walk.hits:
            steps = walk.path(hit)
            r = walk.root(hit)
            if r in seen:
                continue
            seen.add(r)
            info = walk.roots[r]
            out.append({"holder": info["name"], "where": info["where"], "path": steps})
            if len(out) >= 8:
                break
        return out
    finally:
        walk.release()
