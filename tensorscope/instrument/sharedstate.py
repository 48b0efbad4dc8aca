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

Each is recorded where the sharing is made, on a program line: ``Module.register_parameter`` of a
parameter another live module holds, ``Optimizer.load_state_dict`` of tensors it keeps as they are,
``Function.apply`` whose ctx holds tensors as attributes. The entry (a weak reference, the memory
range, the line) is filed under its storage key; the write path looks the written storage up here
with one dict lookup (as for NOTE [Kept values] in kept.py) and records the distinct program lines
that write the shared bytes. A shared object is reported when two different lines write its memory
(each object's own update: the optimizer step and the EMA update, or the two ``step()`` calls). Tied
weights (``lm_head.weight = wte.weight``: two parts of one model, a module that holds both) are not
watched at all; an initialisation line and the optimizer step would otherwise be two writers. A ctx attribute
is reported when its node runs in backward after a write into its memory (a pre-hook on that node,
registered only for a Function whose ctx holds tensors).
"""

from __future__ import annotations

import sys
import weakref

import torch

from tensorscope.instrument.frames import line_of
from tensorscope.instrument.kept import KeptValues, _program_frame, memory, _overlap
from tensorscope.instrument.recorder import storage_key

_Tensor = torch.Tensor
_MAX_ENTRIES = 4096  # watched tensors at once (the owners registry is pruned of the dead beyond it)
_MAX_SITES = 4  # distinct writing lines kept per entry
_WHERE = KeptValues._where


class _Entry:
    __slots__ = ("kind", "ref", "mem", "file", "line", "how", "owner", "sites", "writes", "node", "attr", "node_ref",
                 "__weakref__")

    def __init__(self, kind, t, file, line, how, owner, attr=None):
        self.kind, self.ref, self.mem = kind, weakref.ref(t), memory(t)
        self.file, self.line, self.how, self.owner, self.attr = file, line, how, owner, attr
        self.sites: list = []  # (file, line) of each distinct writing line, first first
        self.writes = 0
        self.node = None
        self.node_ref = None  # a ctx entry: its node, alive while backward may still run it

    def alive(self) -> bool:
        if self.node_ref is not None:
            return self.node_ref() is not None and self.ref() is not None
        return self.ref() is not None or bool(self.sites)


class SharedState:
    """The watched entries of one run, by storage key (``keys``: what the write path looks up)."""

    def __init__(self):
        self.keys: dict[int, list] = {}
        self.owners: dict[int, list] = {}  # storage key -> [(weakref of module, parameter name)]
        self.n = 0
        # the sizes at which the next prune runs: twice what a prune left alive, so that a program with
        # more live parameters than _MAX_ENTRIES prunes a logarithmic number of times, not once a call
        self.prune_owners_at = self.prune_keys_at = _MAX_ENTRIES

    # --- where sharing is made -----------------------------------------------------------------

    def on_register_parameter(self, rec, module, name, param, frame):
        """``module.<name> = param`` (or ``register_parameter``): shared when another live module holds it."""
        try:
            key = storage_key(param)
        except Exception:
            return
        holders = self.owners.get(key)
        if holders is None:
            if len(self.owners) >= self.prune_owners_at:
                self._prune_owners()
                self.prune_owners_at = max(_MAX_ENTRIES, 2 * len(self.owners))
            self.owners[key] = [(weakref.ref(module), name)]
            return
        other = None
        for ref, n in holders:
            m = ref()
            if m is None or m is module:
                continue
            p = m._parameters.get(n)
            if isinstance(p, _Tensor) and _overlap(memory(p), memory(param)):
                other = (m, n)
                break
        holders.append((weakref.ref(module), name))
        if other is None:
            return
        uf = frame if frame.f_code.co_filename in rec.user else _program_frame(frame, rec.user)
        if uf is None or _one_model(module, other[0], frame, uf):
            return
        owner = f"`{type(module).__name__}.{name}`"
        source = f"another module's `{type(other[0]).__name__}.{other[1]}`"
        how = "load_state_dict(assign=True)" if _in_load(frame) else "assignment"
        self._watch(_Entry("state", param, uf.f_code.co_filename, line_of(uf), how, owner, attr=source), key)

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
            alive = [(r, n) for r, n in self.owners[key] if r() is not None]
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
        of writing lines (a model of ten parameters shared by ten assignment lines is one)."""
        found: dict = {}
        seen = set()
        for entries in list(self.keys.values()):
            for e in entries:
                if id(e) in seen or e.kind != "state" or len(e.sites) < 2:
                    continue
                seen.add(id(e))
                t = e.ref()
                tid = rec.note_tensor(t) if t is not None else None
                where = tuple((w.get("file"), w.get("line")) for w in e.sites[:2])
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
        for where, facts in found.items():
            rec.add_hazard(("shared-state",) + where, facts)  # where: the two writing lines


def _one_model(module, other, frame, uf) -> bool:
    """Whether both modules are parts of one model (tied weights: ``self.decoder.weight = self.encoder.weight``
    in the model's ``__init__``, ``model.lm_head.weight = model.wte.weight``): a module in ``self`` of the
    frames from the registering one up to the program's, or among the program frame's names, that holds
    both."""
    candidates = []
    f = frame
    while f is not None:
        try:
            me = f.f_locals.get("self")
        except Exception:
            me = None
        if isinstance(me, torch.nn.Module) and me is not module:
            candidates.append(me)
        if f is uf:
            break
        f = f.f_back
    try:
        candidates += [v for v in list(uf.f_locals.values()) if isinstance(v, torch.nn.Module)]
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
