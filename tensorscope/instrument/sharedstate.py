"""State that one object holds over another object's memory: two models, two optimizers, a ctx attribute.

NOTE [Shared state]
Two objects meant to hold state of their own can end up over the same memory, and nothing raises:

- a model and its EMA or teacher built by assignment (``ema.weight = model.weight``) or by
  ``ema.load_state_dict(model.state_dict(), assign=True)``: the "EMA" moves with the model;
- a second optimizer given the first one's state (``opt_b.load_state_dict(opt_a.state_dict())``
  keeps the very tensors: ``Tensor.to`` returns its input when nothing changes), so each moment is
  updated by both ``step()`` calls;
- a custom ``autograd.Function`` that keeps a tensor as ``ctx.x = x`` instead of
  ``ctx.save_for_backward(x)``: no version counter is checked, so an in-place write to ``x`` between
  forward and backward silently changes the gradient.

Each is recorded where the sharing is made, on a program line: ``Module.register_parameter`` (or
a buffer registration hook: ``ema.running_mean = model.running_mean`` calls the global buffer
registration hooks on every release, through ``register_buffer`` from 2.5, directly before) of a tensor
another live module holds,
``copy.copy(model)`` (``Module.__setstate__`` given the very tensors another live module holds), a
module registered in a second model while another live model holds it (the global module
registration hook: ``target = nn.Sequential(online.backbone, head)``), ``Optimizer.load_state_dict`` of tensors it keeps as they are,
``Function.apply`` whose ctx holds tensors as attributes. The entry (a weak reference, the memory
range, the line) is filed under its storage key; the write path looks the written storage up here
with one dict lookup (as for NOTE [Kept values] in kept.py) and records the distinct program lines
that write the shared bytes. A shared object is reported when two different lines write its memory
(each object's own update: the optimizer step and the EMA update, or the two ``step()`` calls). Tied
weights (``lm_head.weight = wte.weight``: two parts of one model, a module that holds both) are not
watched at all; an initialisation line and the optimizer step would otherwise be two writers. A ctx attribute
is reported when its node runs in backward after a write into its memory (a pre-hook on that node,
registered only for a Function whose ctx holds tensors).

NOTE [A frozen copy that is not one]
A teacher, a reference model or an EMA that shares the student's tensors and is never updated itself
has one writer only, the student's own training, yet it changes at every step: its outputs follow the
student, a distillation or KL term compares the student with itself. One writing line is reported when
the module that received the shared tensors (its root: the largest module among the program's names
that holds it and not the source) is that kind of object:

- it still holds the shared memory when the program ends (``functional_call`` and other temporary
  swaps give it back);
- none of its own tensors (those it does not share) moved after the sharing line: a second model
  trained together with the first (an encoder and a decoder tied by their embeddings, both in the
  optimizer) updates its own parameters, a frozen copy does not;
- a reused module counts only when that root has parameters of its own: a wrapper with none
  (``nn.DataParallel(model)``, a feature extractor around the backbone) is a way to call the model,
  not a copy of it. Its own parameters may be registered after the shared module (``nn.Sequential(
  online.backbone, head)``), so their versions are noted again at the first write into the shared
  memory.

A BatchNorm's running statistics are written inside the ``batch_norm`` kernel, out of sight of the
write path; the ``num_batches_tracked.add_(1)`` that precedes it (see NOTE [Running statistics updated
twice] in runningstats.py) stands for the writes of ``running_mean`` and ``running_var`` of that module.
"""

from __future__ import annotations

import copy
import sys
import weakref

import torch

from tensorscope.instrument.frames import line_of, peek_locals
from tensorscope.instrument.kept import KeptValues, _program_frame, memory, _overlap
from tensorscope.instrument.recorder import storage_key

_Tensor = torch.Tensor
_MAX_ENTRIES = 4096  # watched tensors at once (the owners registry is pruned of the dead beyond it)
_MAX_SITES = 4  # distinct writing lines kept per entry
_WHERE = KeptValues._where


class _Entry:
    __slots__ = ("kind", "ref", "mem", "file", "line", "how", "owner", "sites", "writes", "node", "attr", "node_ref",
                 "receiver", "key", "__weakref__")

    def __init__(self, kind, t, file, line, how, owner, attr=None):
        self.kind, self.ref, self.mem = kind, weakref.ref(t), memory(t)
        self.file, self.line, self.how, self.owner, self.attr = file, line, how, owner, attr
        self.sites: list = []  # (file, line) of each distinct writing line, first first
        self.writes = 0
        self.node = None
        self.node_ref = None  # a ctx entry: its node, alive while backward may still run it
        self.receiver = None  # a module's entry: the _Receiver that was given the tensor
        self.key = None

    def alive(self) -> bool:
        if self.node_ref is not None:
            return self.node_ref() is not None and self.ref() is not None
        return self.ref() is not None or bool(self.sites)


class _Receiver:
    """The module that was given another's tensors (its root) and its own parameters' versions then."""
    __slots__ = ("ref", "versions", "name", "needs_own", "noted_at_write")

    def __init__(self, root):
        self.ref, self.name = weakref.ref(root), type(root).__name__
        self.versions: dict = {}  # id(parameter) -> (weakref, version when a tensor was shared into root)
        self.needs_own = False  # a reused module: frozen only with parameters of its own
        self.noted_at_write = False  # the versions noted again at the first write into the shared memory

    def note(self, keys):
        root = self.ref()
        for p in root.parameters() if root is not None else ():
            if id(p) not in self.versions and _key(p) not in keys:
                self.versions[id(p)] = (weakref.ref(p), p._version)

    def frozen(self, keys):
        """The storage keys the root holds now, if none of its own parameters moved since a tensor was shared
        into it (a frozen copy); None when it did, or the root is gone (see NOTE [A frozen copy that is not one])."""
        root = self.ref()
        if root is None:
            return None
        params = list(root.parameters())
        if self.needs_own and all(_key(p) in keys for p in params):
            return None
        now = {id(p) for p in params}
        for pid, (ref, version) in self.versions.items():
            p = ref()
            if p is not None and pid in now and p._version != version:
                return None
        return {_key(t) for t in params + list(root.buffers())}


def _key(t):
    try:
        return storage_key(t)
    except Exception:
        return None


class SharedState:
    """The watched entries of one run, by storage key (``keys``: what the write path looks up)."""

    def __init__(self):
        self.keys: dict[int, list] = {}
        self.owners: dict[int, list] = {}  # storage key -> [(weakref of module, name, whether a buffer)]
        self.receivers: dict[int, _Receiver] = {}  # id(module) -> the module that was given shared tensors
        self.parents: dict[int, tuple] = {}  # id(module) -> (weakref of it, [(weakref of a parent, name)])
        self.prune_parents_at = _MAX_ENTRIES
        self.n = 0
        # the sizes at which the next prune runs: twice what a prune left alive, so that a program with
        # more live parameters than _MAX_ENTRIES prunes a logarithmic number of times, not once a call
        self.prune_owners_at = self.prune_keys_at = _MAX_ENTRIES

    def release_registries(self) -> None:
        """The program has ended: the registries of who holds which parameter (``owners``) and which module sits
        in which (``parents``) are read only where the program assigns a tensor or a module, so they go before
        the end-of-run snapshot and the report are built on top of them (~1.7 MB of weak references and tuples
        on a model of 2,500 modules and 5,000 parameters: benchmarks/RESULTS.md, "memp18, 2026-11-27").
        ``keys``, which ``finish`` reads, stays. An assignment after this (a thread the program left running)
        finds empty registries: no sharing is recorded for it."""
        self.owners = {}
        self.parents = {}

    # --- where sharing is made -----------------------------------------------------------------

    def on_register_parameter(self, rec, module, name, param, frame, buffer=False):
        """``module.<name> = tensor`` (``register_parameter``/``register_buffer``): shared when another live
        module holds it."""
        key = _key(param)
        if key is None:
            return
        holders = self.owners.get(key)
        if holders is None:
            if len(self.owners) >= self.prune_owners_at:
                self._prune_owners()
                self.prune_owners_at = max(_MAX_ENTRIES, 2 * len(self.owners))
            self.owners[key] = [(weakref.ref(module), name, buffer)]
            return
        other = None
        for ref, n, b in holders:
            m = ref()
            if m is None or m is module:
                continue
            p = (m._buffers if b else m._parameters).get(n)
            if isinstance(p, _Tensor) and _overlap(memory(p), memory(param)):
                other = (m, n)
                break
        holders.append((weakref.ref(module), name, buffer))
        if other is None:
            return
        uf = frame if frame.f_code.co_filename in rec.user else _program_frame(frame, rec.user)
        if uf is None or _one_model(module, other[0], frame, uf):
            return
        owner = f"`{type(module).__name__}.{name}`"
        source = f"another module's `{type(other[0]).__name__}.{other[1]}`"
        how = "load_state_dict(assign=True)" if _in_load(frame) else "assignment"
        e = _Entry("state", param, uf.f_code.co_filename, line_of(uf), how, owner, attr=source)
        e.receiver = self._receiver(_root(module, other[0], uf))
        self._watch(e, key)
        e.receiver.note(self.keys)

    def on_shallow_copy(self, rec, module, frame):
        """``copy.copy(model)`` (``Module.__setstate__`` called by ``copy``): the copy holds the very
        parameters and buffers of the original, a live module."""
        try:
            caller = frame
            while caller is not None and caller.f_code.co_filename == copy.__file__:
                caller = caller.f_back  # copy._reconstruct, copy.copy
            if caller is None or caller is frame or caller.f_code.co_filename not in rec.user:
                return
            receiver = None
            for kind, name, t in _tensors(module):
                key = _key(t)
                holders = self.owners.get(key) if key is not None else None
                if not holders or not any(r() is not None for r, _, _ in holders):
                    continue
                if receiver is None:
                    receiver = self._receiver(module)
                e = _Entry("state", t, caller.f_code.co_filename, line_of(caller), "copy.copy",
                           f"`{type(module).__name__}` {kind} `{name}`",
                           attr=f"the original `{type(module).__name__}`'s {kind}")
                e.receiver = receiver
                self._watch(e, key)
        except Exception:
            pass

    def on_register_module(self, rec, parent, name, module, frame):
        """``parent.<name> = module`` (``add_module``): a module another live model holds is reused, and its
        tensors are shared state when the new parent's model has parameters of its own that stay frozen
        (see NOTE [A frozen copy that is not one]; a wrapper with none, ``DataParallel(model)``, is not)."""
        try:
            entry = self.parents.get(id(module))
            if entry is None or entry[0]() is not module:
                if len(self.parents) >= self.prune_parents_at:
                    self.parents = {k: v for k, v in self.parents.items() if v[0]() is not None}
                    self.prune_parents_at = max(_MAX_ENTRIES, 2 * len(self.parents))
                self.parents[id(module)] = (weakref.ref(module), [(weakref.ref(parent), name)])
                return
            other = None
            for ref, n in entry[1]:
                p = ref()
                if p is not None and p is not parent and p._modules.get(n) is module:
                    other, other_name = p, n
                    break
            entry[1].append((weakref.ref(parent), name))
            if other is None:
                return
            uf = frame if frame.f_code.co_filename in rec.user else _program_frame(frame, rec.user)
            if uf is None or _one_model(parent, other, frame, uf):
                return
            receiver = self._receiver(_root(parent, other, uf))
            receiver.needs_own = True  # a wrapper with nothing of its own (`DataParallel(model)`) is no copy
            for kind, n, t in _tensors(module):
                key = _key(t)
                if key is None:
                    continue
                e = _Entry("state", t, uf.f_code.co_filename, line_of(uf), "module reused",
                           f"`{receiver.name}`'s {kind} `{name}.{n}`",
                           attr=f"the `{type(module).__name__}` another model holds (`{type(other).__name__}.{other_name}`)")
                e.receiver = receiver
                self._watch(e, key)
            receiver.note(self.keys)
        except Exception:
            pass

    def _receiver(self, root):
        r = self.receivers.get(id(root))
        if r is None or r.ref() is not root:
            r = self.receivers[id(root)] = _Receiver(root)
        return r

    def on_running_stats(self, rec, frame, uf):
        """A BatchNorm update: its ``running_mean``/``running_var`` are written inside the kernel that follows
        (see NOTE [A frozen copy that is not one])."""
        try:
            module = peek_locals(frame).get("self")
            for name in ("running_mean", "running_var"):
                t = getattr(module, name, None)
                if isinstance(t, _Tensor):
                    key = _key(t)
                    if key in self.keys:
                        self.on_write(rec, t, "batch_norm", frame, uf, key)
        except Exception:
            pass

    def on_optimizer_load(self, rec, opt, state_dict, frame):
        """``opt.load_state_dict(sd)``: the state tensors it kept as they are (not copied) are shared."""
        try:
            given = set()
            for per_param in (state_dict.get("state") or {}).values():
                for v in per_param.values():
                    if isinstance(v, _Tensor):
                        given.add(storage_key(v))
            if not given:
                return
            uf = frame if frame.f_code.co_filename in rec.user else _program_frame(frame, rec.user)
            if uf is None:
                return
            for per_param in opt.state.values():
                for k, v in per_param.items():
                    if isinstance(v, _Tensor) and storage_key(v) in given:
                        self._watch(_Entry("state", v, uf.f_code.co_filename, line_of(uf), "load_state_dict",
                                           f"`{type(opt).__name__}` state '{k}'",
                                           attr="the given state_dict's tensors (another optimizer's state)"),
                                    storage_key(v))
        except Exception:
            pass

    def on_function_apply(self, rec, fn_cls, out, frame):
        """``Fn.apply(...)`` on a program line: tensors its ctx holds as attributes, to be checked at backward."""
        try:
            outs = out if isinstance(out, (tuple, list)) else (out,)
            node = next((o.grad_fn for o in outs if isinstance(o, _Tensor) and o.grad_fn is not None), None)
            attrs = getattr(node, "__dict__", None)
            if not attrs:
                return
            held = []
            for attr, v in attrs.items():
                for i, t in enumerate(v if isinstance(v, (list, tuple)) else (v,)):
                    if isinstance(t, _Tensor) and type(t) in (_Tensor, torch.nn.Parameter):
                        held.append((f"ctx.{attr}" + (f"[{i}]" if isinstance(v, (list, tuple)) else ""), t))
            if not held:
                return
            uf = frame if frame.f_code.co_filename in rec.user else _program_frame(frame, rec.user)
            if uf is None:
                return
            entries = []
            for attr, t in held:
                e = _Entry("ctx", t, uf.f_code.co_filename, line_of(uf), "ctx", fn_cls.__name__, attr=attr)
                e.node = type(node).__name__
                e.node_ref = weakref.ref(node)
                self._watch(e, storage_key(t))
                entries.append(weakref.ref(e))
            node.register_prehook(_ctx_check(rec, entries))
        except Exception:
            pass

    def _watch(self, entry, key):
        if entry.mem is None:
            return
        entry.key = key
        if self.n >= self.prune_keys_at:
            self._prune()
            self.prune_keys_at = max(_MAX_ENTRIES, 2 * self.n)
            if self.n >= _MAX_ENTRIES:
                return
        self.keys.setdefault(key, []).append(entry)
        self.n += 1

    def _prune(self):
        for key in list(self.keys):
            alive = [e for e in self.keys[key] if e.alive()]
            if alive:
                self.keys[key] = alive
            else:
                del self.keys[key]
        self.n = sum(len(v) for v in self.keys.values())

    def _prune_owners(self):
        for key in list(self.owners):
            alive = [h for h in self.owners[key] if h[0]() is not None]
            if alive:
                self.owners[key] = alive
            else:
                del self.owners[key]

    # --- writes ----------------------------------------------------------------------------------

    def on_write(self, rec, target, op, frame, uf, key):
        """An in-place write into a watched storage (the write path's one lookup matched)."""
        mem = None
        entries = self.keys.get(key, ())
        dead = False
        for e in entries:
            if not e.alive():
                dead = True
                continue
            if len(e.sites) >= _MAX_SITES:
                e.writes += 1
                continue
            if mem is None:
                mem = memory(target)
            if not _overlap(mem, e.mem):
                continue
            e.writes += 1
            r = e.receiver
            if r is not None and not r.noted_at_write:  # parameters registered after the sharing line
                r.noted_at_write = True
                r.note(self.keys)
            pf = uf if uf is not None else _program_frame(frame, rec.user)
            here = (pf.f_code.co_filename, line_of(pf)) if pf is not None else (None, None)
            if any((s["file"], s["line"]) == here for s in e.sites):
                continue
            e.sites.append(_WHERE(rec, target, op, frame, uf))
        if dead:
            alive = [e for e in entries if e.alive()]
            self.n -= len(entries) - len(alive)
            if alive:
                self.keys[key] = alive
            else:
                self.keys.pop(key, None)

    # --- the end ---------------------------------------------------------------------------------

    def finish(self, rec) -> None:
        """Hand each shared object whose memory two different lines wrote on as a hazard, one per pair
        of writing lines (a model of ten parameters shared by ten assignment lines is one); and each frozen
        copy that one line wrote through its source (see NOTE [A frozen copy that is not one])."""
        found: dict = {}
        seen = set()
        frozen: dict = {}  # id(receiver) -> the keys it holds, or None
        for entries in list(self.keys.values()):
            for e in entries:
                if id(e) in seen or e.kind != "state" or not e.sites:
                    continue
                seen.add(id(e))
                if len(e.sites) < 2:
                    r = e.receiver
                    if r is None:
                        continue
                    if id(r) not in frozen:
                        frozen[id(r)] = r.frozen(self.keys)
                    if not frozen[id(r)] or e.key not in frozen[id(r)]:
                        continue
                t = e.ref()
                tid = rec.note_tensor(t) if t is not None else None
                where = tuple((w.get("file"), w.get("line")) for w in e.sites[:2])
                if len(where) == 1:
                    where += (id(e.receiver),)  # one writer: one hazard per writing line and frozen copy
                facts = found.get(where)
                if facts is not None:
                    facts["tensors"].append(tid)
                    facts["write_count"] += e.writes
                    continue
                found[where] = {
                    "kind": "shared-state", "tensor": tid, "tensors": [tid], "owner": e.owner, "source": e.attr,
                    "kept": {"op": e.how, "file": e.file, "line": e.line},
                    "writes": list(e.sites), "write_count": e.writes,
                }
                if len(e.sites) == 1:
                    facts = found[where]
                    facts["frozen"] = e.receiver.name  # never updated itself: changed by the source's writes only
        for where, facts in found.items():
            if "frozen" in facts:  # the writing line and the (first) sharing line
                where = where[:1] + ((facts["kept"]["file"], facts["kept"]["line"]),)
            rec.add_hazard(("shared-state",) + where, facts)  # where: the two writing lines


def _tensors(module):
    """(``"parameter"``/``"buffer"``, qualified name, tensor) of a module and its submodules."""
    for name, p in module.named_parameters():
        yield "parameter", name, p
    for name, b in module.named_buffers():
        yield "buffer", name, b


def _root(module, other, uf):
    """The largest module among the program frame's names that holds ``module`` and not ``other``: the
    object that was given another's tensors (the teacher, not its ``fc``); ``module`` when none does."""
    best, size = module, 0
    try:
        names = list(peek_locals(uf).values())
    except Exception:
        names = []
    for v in names:
        if not isinstance(v, torch.nn.Module) or v is other:
            continue
        try:
            parts = [m for m in v.modules()]
        except Exception:
            continue
        ids = {id(m) for m in parts}
        if id(module) in ids and id(other) not in ids and len(parts) > size:
            best, size = v, len(parts)
    return best


def _one_model(module, other, frame, uf) -> bool:
    """Whether both modules are parts of one model (tied weights: ``self.decoder.weight = self.encoder.weight``
    in the model's ``__init__``, ``model.lm_head.weight = model.wte.weight``): a module in ``self`` of the
    frames from the registering one up to the program's, or among the program frame's names, that holds
    both."""
    candidates = []
    f = frame
    while f is not None:
        try:
            me = peek_locals(f).get("self")
        except Exception:
            me = None
        if isinstance(me, torch.nn.Module) and me is not module:
            candidates.append(me)
        if f is uf:
            break
        f = f.f_back
    try:
        candidates += [v for v in peek_locals(uf).values() if isinstance(v, torch.nn.Module)]
    except Exception:
        pass
    seen = set()
    for root in candidates:
        if id(root) in seen or root is module or root is other:
            continue
        seen.add(id(root))
        try:
            parts = {id(m) for m in root.modules()}
        except Exception:
            continue
        if id(module) in parts and id(other) in parts:
            return True
    return False


def _in_load(frame) -> bool:
    """Whether a parameter is being registered by ``Module.load_state_dict(..., assign=True)``."""
    f = frame
    for _ in range(6):
        if f is None:
            return False
        if f.f_code.co_name == "_load_from_state_dict":
            return True
        f = f.f_back
    return False


def _ctx_check(rec, entries):
    """The pre-hook of a custom Function's node: a ctx attribute whose memory was written since forward."""
    def check(grad_outputs):
        try:
            for ref in entries:
                e = ref()
                if e is None or not e.sites:
                    continue
                t = e.ref()
                first = e.sites[0]
                bf = _program_frame(sys._getframe(1), rec.user)
                facts = {
                    "kind": "ctx-attribute-changed", "tensor": rec.note_tensor(t) if t is not None else None,
                    "function": e.owner, "node": e.node, "attr": e.attr,
                    "kept": {"op": "ctx", "file": e.file, "line": e.line},
                    "writes": list(e.sites), "write_count": e.writes,
                    "backward": {"file": bf.f_code.co_filename, "line": line_of(bf)} if bf is not None else None,
                }
                rec.add_hazard(("ctx", e.file, e.line, e.attr, first.get("file"), first.get("line")), facts)
        except Exception:
            pass
        return None

    return check
