"""Values the program keeps that share memory with a tensor it later writes in place.

NOTE [Kept values]
A "snapshot" that is not one: ``best = model.state_dict()``, ``init = w.detach()``, ``prev = w.data``,
``row = w[0]``, ``t = torch.from_numpy(a)``. Each is an alias: it reads the same bytes as the tensor it
came from, so the optimizer step, ``zero_()``, ``copy_`` or ``+=`` on that tensor changes the kept value
too, and nothing raises. tensorscope records three things, all cheap:

- the keeping: an alias taken on a program line (``.detach()``, ``.data``, a view of a leaf tensor, every
  tensor of a ``state_dict()``, a tensor made over NumPy's or a buffer's memory), filed under its
  storage key with a weak reference and the line; its memory range is read at the first write into
  that storage (a kept value over outside memory: at once, to link it), so the many views a loop takes
  and drops (``x = data[i]``) cost a weak reference each;
- the first write after it: the write path of every in-place op does one dict lookup of the written
  storage here (see NOTE [Hot path] in patches.py); only a storage with a kept alias goes further, and
  a write counts when its bytes overlap the kept value's and it is not a write through the kept value
  itself (the program changing its own copy on purpose);
- the end: a kept value whose memory a later write changed is handed on as a hazard
  (``kept-value-changed``) when it is still alive when the program ends, or when it died after that
  write (see NOTE [A kept value that dies with its function]). Whether the program read it after the
  write is decided from the program's text by the kind's explainer (kinds/kept_value_changed.py).

NOTE [A kept value that dies with its function]
Real training scripts keep their state in ``main()``: ``best_state = model.state_dict()`` is a local
that dies when ``main()`` returns, just before the program ends, so "alive at the end" would make the
same bug a finding at module level and none in a function. A kept value written after it was kept
therefore counts whether or not it is still alive at the end. Its tensor id is taken at its first
write (the only moment it is both alive and known to matter), once per keeping line and writing line,
so a loop that keeps and drops a view per step adds one tensor to the report, not one per step.

Memory, not storage objects: ``torch.from_numpy(a)`` and ``torch.as_tensor(a)`` over one array, or
``from_numpy(t.numpy())``, are distinct storages over the same bytes (see NOTE [Memory groups] in
report.py). A kept value made over outside memory is also filed under the key of every storage whose
memory it overlaps (the other tensors made over the same array, the tensor whose ``.numpy()`` made
it), so a write through either side is seen.
"""

from __future__ import annotations

import sys
import weakref

import torch

from tensorscope.instrument import speedups as _speedups
from tensorscope.instrument.frames import signals_wait, line_of, receiver
from tensorscope.instrument.recorder import storage_key

_Tensor = torch.Tensor
_ref = weakref.ref
_MAX_KEPT = 4096  # live kept values tracked at once (a bound: the report says when it was reached)
_MAX_EXPORTS = 256  # `.numpy()` results remembered, to link a later `from_numpy` of them
_MAX_YOUNG = 64  # young kept values waiting for a write before they are settled all the same
#: ops that make a tensor over memory torch did not allocate (NumPy's, a buffer's, DLPack's)
EXTERNAL = frozenset({"from_numpy", "as_tensor", "frombuffer", "from_dlpack", "asarray"})
#: alias ops that keep a value whatever the base (a view of a non-leaf is an intermediate of a forward)
_KEEPING = frozenset({"detach", "data", "state_dict"})


def memory(t):
    """(device, start, end): the absolute bytes a tensor reads, or None."""
    try:
        n = t.numel()
        size = t.element_size()
        ptr = t.data_ptr()
        if n == 0 or not ptr:
            return None
        lo = hi = 0
        for s, st in zip(t.shape, t.stride()):
            if st >= 0:
                hi += (s - 1) * st
            else:
                lo += (s - 1) * st
        return (t.device, ptr + lo * size, ptr + (hi + 1) * size)
    except Exception:
        return None


def _array_memory(a):
    """(device, start, end) of a NumPy array's bytes, or None."""
    try:
        start = a.__array_interface__["data"][0]
        n = a.nbytes
        if not start or not n:
            return None
        return (torch.device("cpu"), start, start + n)
    except Exception:
        return None


def _overlap(a, b) -> bool:
    return a is not None and b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


class _Kept:
    __slots__ = ("ref", "tid", "op", "file", "line", "source", "version", "mem", "key", "write", "writes",
                 "external", "shares_counter", "write_key", "died", "watch", "holder")

    def __init__(self, ref, tid, op, file, line, source, version, mem, key, external, shares_counter):
        self.ref, self.tid, self.op, self.file, self.line = ref, tid, op, file, line
        self.source, self.version, self.mem, self.key = source, version, mem, key
        self.external, self.shares_counter = external, shares_counter
        self.write = None
        self.write_key = None
        self.writes = 0
        self.died = None  # (file, line) of the program's line running when it died (NOTE [When a kept value died])
        self.watch = None
        self.holder = None  # an optimizer state_dict()'s snapshot (NOTE [An optimizer's state_dict is its state])


class KeptValues:
    """The kept aliases of one run, by storage key (``keys``: what the write path looks up)."""

    def __init__(self):
        self.keys: dict[int, list] = {}
        self.young: list = []  # kept values not filed yet (see NOTE [Young kept values])
        self.n = 0
        self.full = False
        self.exports: list = []  # (weakref of the tensor, its storage key, memory) of `.numpy()` calls
        # (keeping file, line, writing file, line) -> (entry, tensor id) noted at its first write
        self.first: dict = {}
        # (aliasing file, line, writing file, line) -> facts of the caller's data written through an alias
        # taken in a function (NOTE [The caller's data written through an alias])
        self.through: dict = {}

    # --- keeping ---------------------------------------------------------------------------------

    def on_alias(self, rec, op, base, outs, frame, site=None):
        """An alias taken on a program line: keep it when it may be a snapshot (see NOTE [Kept values]).

        ``site``: the counted line's site ``(kind, file, line)`` of the call, when its caller knows it (NOTE [A
        counted line's calls] in calls.py): its file and line are the frame's, read there once."""
        if op not in _KEEPING:
            if not isinstance(base, _Tensor) or base.grad_fn is not None:
                return
        # ``keep`` for an alias (never over outside memory), inlined: the young list only (NOTE [Young kept values]).
        # Kept apart from ``keep`` on purpose: this runs for every alias a program line takes, and a call to
        # ``keep`` there is a Python call on the hot path (NOTE [Hot path] in patches.py); change both together.
        young = self.young
        try:
            src = _ref(base) if isinstance(base, _Tensor) else None
            if site is None:
                file, line = frame.f_code.co_filename, line_of(frame)
            else:
                file, line = site[1], site[2]
            for out in outs:
                if isinstance(out, _Tensor):
                    young.append((_ref(out), op, file, line, src, out._version, op != "data"))
            if len(young) >= _MAX_YOUNG:
                self.settle(rec)
        except Exception:
            pass

    def on_state_dict(self, rec, sd, frame):
        """``module.state_dict()`` called on a program line: each tensor in it is a detached alias."""
        try:
            values = list(sd.values())[:_MAX_KEPT]
        except Exception:
            return
        for v in values:
            if isinstance(v, _Tensor):
                self.keep(rec, "state_dict", v, None, frame)

    def on_optimizer_state_dict(self, rec, opt, sd, frame):
        """``optimizer.state_dict()`` called on a program line: its per-parameter dicts are the optimizer's
        own, and their tensors the ones its next steps write (NOTE [An optimizer's state_dict is its state])."""
        try:
            state = sd.get("state") if isinstance(sd, dict) else None
            if not isinstance(state, dict) or not state:
                return
            vids = [id(v) for v in state.values() if isinstance(v, dict)]
            tensors = [t for v in state.values() if isinstance(v, dict) for t in v.values() if isinstance(t, _Tensor)]
            if not vids or not tensors:
                return
            oref = _ref(opt)
            holder = _Snapshot(oref, {vid: _refcount(opt, vid) for vid in vids})
            file, line = frame.f_code.co_filename, line_of(frame)
            for t in tensors[:_MAX_KEPT]:
                if not self._room(rec):
                    return
                key = storage_key(t)
                entry = _Kept(_ref(t), None, "optimizer_state_dict", file, line, None, t._version, None, key,
                              False, True)
                entry.holder = holder
                self._file(key, entry)
                self.n += 1
            tensors = None
        except Exception:
            pass

    def on_export(self, rec, t, array, frame):
        """``t.numpy()``: a later ``from_numpy`` of the array reads ``t``'s bytes through another storage; and
        the array itself, taken on a program line, is a kept value (see NOTE [A NumPy array is a kept value])."""
        try:
            mem = _array_memory(array)
            if len(self.exports) >= _MAX_EXPORTS:
                self.exports = [e for e in self.exports if e[0]() is not None][-_MAX_EXPORTS // 2:]
            self.exports.append((weakref.ref(t), storage_key(t), mem))
            if mem is None or frame is None or frame.f_code.co_filename not in rec.user or not self._room(rec):
                return
            key = storage_key(t)
            entry = _Kept(weakref.ref(array), None, "numpy", frame.f_code.co_filename, line_of(frame),
                          weakref.ref(t), t._version, mem, key, True, False)
            self._file(key, entry)
            self.n += 1
        except Exception:
            pass

    # NOTE [A NumPy array is a kept value]
    # ``t.numpy()`` of a CPU tensor returns an array over the tensor's own bytes: ``history.append(w.numpy())``
    # in a loop that then writes ``w`` in place keeps the same numbers N times. The array is kept like a tensor
    # alias (a weak reference: NumPy arrays take them; its memory read at once, as for outside memory), filed
    # under the tensor's storage key, so the write path's one look-up sees the write. It has no tensor id: the
    # hazard names it by the name its keeping line bound (kinds/kept_value_changed.py), and its source is the
    # tensor. Writes made by NumPy into the array bump no version and are not seen (docs/aliasing.md).

    def keep(self, rec, op, t, base, frame):
        try:
            n = 0
            while base is not None and not isinstance(base, _Tensor) and n < 32:  # `a[i]`'s owner: the array `a`
                owner = getattr(base, "base", None)
                if owner is None or not hasattr(owner, "__array_interface__"):
                    break
                base, n = owner, n + 1
            try:
                src = weakref.ref(base) if base is not None else None  # its id is taken at the end, if at all
            except TypeError:  # a bytearray, a capsule: no weak reference, no source
                src = None
            if op not in EXTERNAL:  # filed at the next write, if it is still alive then (see NOTE [Young kept values])
                young = self.young
                young.append((weakref.ref(t), op, frame.f_code.co_filename, line_of(frame), src, t._version,
                              op != "data"))
                if len(young) >= _MAX_YOUNG:
                    self.settle(rec)
                return
            if not self._room(rec):
                return
            # outside memory is linked now: its bytes are read at once
            mem = memory(t)
            if mem is None:
                return
            entry = _Kept(weakref.ref(t), None, op, frame.f_code.co_filename, line_of(frame), src, t._version,
                          mem, storage_key(t), True, False)
            self._file(entry.key, entry)
            self.n += 1
            self._link(entry)
        except Exception:
            pass

    # NOTE [Young kept values]
    # Most kept views die young: ``x = data[i]`` in a training loop, ``b[1:].sum()`` in an expression.
    # Filing each under its storage key when it is taken (a ``_Kept``, its storage key, the write path's
    # look-up hitting it until a write prunes it, and malloc handing the dead view's storage address to
    # the next tensor) cost about 18 us a view (benchmarks/RESULTS.md). A view of torch's own memory is
    # therefore put on ``young`` with a weak reference, its line and its version, and filed by
    # ``settle`` at the next write (before the write path's look-up: the write path calls it first) or
    # at the end of the run, and only if it is still alive then: a view that died before any write
    # into any storage could not have seen one. What it files is what ``keep`` filed before; the
    # storage key is read at filing (no write ran in between to move a storage).

    def settle(self, rec) -> None:
        """File the young kept values still alive (see NOTE [Young kept values])."""
        young, self.young = self.young, []
        for ref, op, file, line, src, version, shares_counter in young:
            t = ref()
            if t is None:
                continue
            try:
                if not self._room(rec):
                    return
                key = storage_key(t)
                self._file(key, _Kept(ref, None, op, file, line, src, version, None, key, False, shares_counter))
                self.n += 1
            except Exception:
                continue

    def _room(self, rec) -> bool:
        """Whether one more kept value may be tracked (see ``_MAX_KEPT``)."""
        if self.n >= _MAX_KEPT:
            self._prune()
            if self.n >= _MAX_KEPT:
                if not self.full:
                    self.full = True
                    rec.note(f"more than {_MAX_KEPT:,} kept aliases alive at once: later ones were not "
                             "checked for writes (kept-value-changed)")
                return False
        return True

    def _file(self, key, entry):
        entries = self.keys.get(key)
        if entries is None:
            self.keys[key] = [entry]
        else:
            entries.append(entry)

    def _link(self, entry):
        """File an entry over outside memory under every storage known to read the same bytes."""
        others = set()
        for key, entries in list(self.keys.items()):
            if key == entry.key:
                continue
            for e in entries:
                if e.external and e.ref() is not None and _overlap(e.mem, entry.mem):
                    others.add(key)
                    self._file(entry.key, e)  # and the other way round: a write through this one
                    break
        for ref, key, mem in self.exports:
            if key != entry.key and ref() is not None and _overlap(mem, entry.mem):
                others.add(key)
        for key in others:
            self._file(key, entry)

    def _prune(self):
        n = 0
        for key in list(self.keys):
            alive = [e for e in self.keys[key] if e.ref() is not None]
            if alive:
                self.keys[key] = alive
                n += len({id(e) for e in alive if e.key == key})
            else:
                del self.keys[key]
        self.n = n

    # --- writes ----------------------------------------------------------------------------------

    def on_write(self, rec, target, op, frame, uf, key):
        """An in-place write into a storage with kept aliases (the write path's one lookup matched)."""
        entries = self.keys.get(key)
        if not entries:
            return
        mem = None
        dead = False
        # the tensors the written one was taken from (`tmp = y.detach(); tmp.mul_(2)` writes y on purpose)
        made_from = [m for m in (e.source() for e in entries if e.source is not None and e.ref() is target)
                     if isinstance(m, _Tensor)]
        for e in entries:
            k = e.ref()
            if k is None:
                dead = True
                continue
            if e.holder is not None:  # see NOTE [An optimizer's state_dict is its state]
                if e.write is None and not e.holder.alive():
                    dead = True
                    e.ref = _DEAD
                    continue
            elif k is target or any(m is k for m in made_from):
                if e.source is not None and e.op not in _KEEPING:
                    self._through(rec, e, target, op, frame, uf)
                continue
            else:
                try:
                    if target._base is k:  # a write through a view of the kept value: the program's own
                        continue
                except Exception:
                    pass
            if e.write is not None:  # found already: later writes into its storage are only counted
                e.writes += 1
                continue
            if mem is None:
                mem = memory(target)
            if e.mem is None:
                e.mem = memory(k)
            if not _overlap(mem, e.mem):
                continue
            e.writes += 1
            if e.write is None:
                e.write = self._where(rec, target, op, frame, uf)
                e.write_key = key
                try:
                    e.watch = weakref.ref(k, _on_death(e, rec.user))
                except TypeError:
                    pass
                where = (e.file, e.line, e.write.get("file"), e.write.get("line"))
                if where not in self.first:  # see NOTE [A kept value that dies with its function]
                    self.first[where] = (e, rec.note_tensor(k) if isinstance(k, _Tensor) else None)
        if dead:
            alive = [e for e in entries if e.ref() is not None]
            if alive:
                self.keys[key] = alive
            else:
                del self.keys[key]

    def _through(self, rec, e, target, op, frame, uf):
        """A write through the kept alias itself: the caller's data changed when the alias was taken in the
        writing function from memory it did not make (NOTE [The caller's data written through an alias])."""
        try:
            if uf is None or op in _OVERWRITES:
                return
            code = uf.f_code
            where = (e.file, e.line)  # one per aliasing line: its first write is the culprit
            facts = self.through.get(where)
            if facts is not None:
                facts["write_count"] += 1
                if facts["calls"] is not None and facts["calls"] is not e.ref and e.source is facts["source_ref"]:
                    # another alias of the same data (weakref.ref hands out one reference per object): another call
                    facts["repeated"] = True
                    facts["calls"] = None
                return
            if code.co_name == "<module>" or _in_place_name(code.co_name) or len(self.through) >= 64:
                return
            caller = uf.f_back
            inside = code.co_filename == e.file and code.co_firstlineno <= e.line <= uf.f_lineno
            handed = caller is not None and caller.f_code.co_filename == e.file and caller.f_lineno == e.line
            caller = None
            if not (inside or handed):  # taken in this function, or on the line that called it (`f(X[i:j])`)
                return
            src = e.source()
            if src is None or src is target:
                return
            if isinstance(src, _Tensor):
                if src.requires_grad or src.grad_fn is not None or isinstance(src, torch.nn.Parameter):
                    return
                made = rec.tensor_created.get(rec.tid(src))
                if made and made.get("file") == code.co_filename and code.co_firstlineno <= made.get("line", 0) <= uf.f_lineno:
                    return  # made in this function: its own buffer
            f, n = uf.f_back, 0
            while f is not None and n < 64:  # inside a module's call: the module's own state (a buffer updated on purpose)
                if f.f_code.co_name in ("_call_impl", "_wrapped_call_impl") and \
                        f.f_code.co_filename.replace("\\", "/").endswith("torch/nn/modules/module.py"):
                    return
                f, n = f.f_back, n + 1
            f = None
            self.through[where] = {
                "kind": "kept-value-changed", "through": True, "source_ref": weakref.ref(src),
                "tensor": rec.note_tensor(src) if isinstance(src, _Tensor) else None,
                "source_type": type(src).__name__, "function": code.co_name, "repeated": False, "handed": not inside,
                "calls": e.ref,
                "kept": {"op": e.op, "file": e.file, "line": e.line, "source": None},
                "writes": [self._where(rec, target, op, frame, uf)], "write_count": 1,
                "version_at_keep": e.version, "version_now": None, "shares_version_counter": e.shares_counter,
                "distinct_storage": False, "alive_at_end": True, "died": None, "count": 1, "names": [],
            }
        except Exception:
            pass

    @staticmethod
    def _where(rec, target, op, frame, uf):
        if uf is None:  # `opt.zero_grad()` runs inside torch._dynamo's `disable` wrapper: an eager write all the same
            uf = _program_frame(frame, rec.user)
        loc = rec.location(frame, uf)
        alias = receiver(loc["segment"], op) if loc["library"] is None else loc["segment"]
        return {"op": op, "file": loc["file"], "line": loc["line"], "alias": alias, "library": loc["library"],
                "tensor": rec.note_tensor(target), "version": target._version}

    # --- the end ---------------------------------------------------------------------------------

    def finish(self, rec, named: dict) -> None:
        """Hand each kept value that a later write changed on as a hazard: one
        per keeping line and writing line (a `state_dict()` of ten tensors changed by one `step()` is one).
        A kept value that died after the write is handed on too, under the id noted at that write
        (see NOTE [A kept value that dies with its function])."""
        self.settle(rec)
        seen = set()
        found: dict = {}
        alive = [e for entries in list(self.keys.values()) for e in entries]
        dead = [e for e, _ in self.first.values()]
        for e in alive + dead:
            if id(e) in seen or e.write is None:
                continue
            seen.add(id(e))
            where = (e.file, e.line, e.write.get("file"), e.write.get("line"))
            k = e.ref()
            if k is not None:
                try:
                    version_now = k._version
                except Exception:
                    version_now = None
                tid = rec.note_tensor(k) if isinstance(k, _Tensor) else None  # a NumPy array has no tensor id
            elif self.first.get(where, (None,))[0] is e and where not in found:
                version_now, tid = None, self.first[where][1]
            else:
                continue
            base = e.source() if e.source is not None else None
            if not isinstance(base, _Tensor):
                base = None
            facts = found.get(where)
            if facts is not None:
                if tid is not None:
                    facts["tensors"].append(tid)
                facts["count"] += 1
                continue
            found[where] = {
                "kind": "kept-value-changed", "tensor": tid, "tensors": [tid] if tid is not None else [],
                "count": 1, "names": list(named.get(tid, ())),
                "kept": {"op": e.op, "file": e.file, "line": e.line, "source": rec.note_tensor(base) if base is not None else None},
                "writes": [e.write], "write_count": e.writes,
                "version_at_keep": e.version, "version_now": version_now,
                "shares_version_counter": e.shares_counter,
                "distinct_storage": e.key != e.write_key,
                "alive_at_end": k is not None,
                "died": {"file": e.died[0], "line": e.died[1]} if k is None and e.died else None,
            }
        for where, facts in found.items():
            rec.add_hazard(("kept",) + where, facts)
        for where, facts in self.through.items():  # NOTE [The caller's data written through an alias]
            facts.pop("calls", None)
            src = facts.pop("source_ref")()
            if src is None:  # the caller's data died: nothing reads it after the write
                continue
            if isinstance(src, _Tensor):
                facts["version_now"] = src._version
                facts["names"] = list(named.get(facts["tensor"], ()))
            src = None
            rec.add_hazard(("through",) + where, facts)
        self.through = {}



# NOTE [When a kept value died]
# A kept value that died after the write was read after it only if the reading line ran before it
# died: ``best = model.state_dict()`` before the loop, rebound by ``best = model.state_dict()`` in the
# loop's first step, is gone when ``model.load_state_dict(best)`` after the loop loads the name, which
# by then names the second snapshot. So at its first write a kept value gets a weak reference whose
# callback notes the program's line running when it is freed (the rebinding line, or the line that
# called the function it died with); the explainer stops counting loads past that line
# (kinds/_reads.py). One weak reference per kept value found written, nothing per event.


# NOTE [An optimizer's state_dict is its state]
# ``optimizer.state_dict()`` packs ``self.state`` by parameter index, but the per-parameter dicts in it
# are the optimizer's own dict objects and their tensors (``exp_avg``, ``step``, ``momentum_buffer``)
# the very tensors its next ``step()`` writes in place (torch/optim/optimizer.py, ``pack_state``;
# 2.2 to 2.13): a "best" optimizer state kept beside a deep copy of the weights follows training
# (pytorch/pytorch#34765). Unlike a module's state_dict, whose detached tensors die with the dict, these
# tensors live on in the optimizer whether or not the program kept the dict, so whether the snapshot is
# still held is read from the per-parameter dicts' reference counts: at the call, each is held by the
# optimizer's ``state`` and by the returned dict; at a later write, a count below the one at the call
# means the returned dict is gone (``copy.deepcopy(optimizer.state_dict())``, ``torch.save(...)``) and
# the entries are dropped. All the dicts must keep their count, so a step's local holding one does not
# count as a snapshot. The check runs at the first write into each kept tensor only.


class _Snapshot:
    __slots__ = ("opt", "counts", "dead")

    def __init__(self, opt, counts):
        self.opt, self.counts, self.dead = opt, counts, False

    def alive(self) -> bool:
        if self.dead:
            return False
        opt = self.opt()
        ok = opt is not None and all(_refcount(opt, vid) >= n for vid, n in self.counts.items())
        opt = None
        if not ok:
            self.dead = True
        return ok


def _refcount(opt, vid) -> int:
    """The reference count of the optimizer's per-parameter state dict with id ``vid`` (0: gone). Keep the
    shape of this function: the counts compared are read through it at the call and at the write."""
    try:
        for st in opt.state.values():
            if id(st) == vid:
                return sys.getrefcount(st)
    except Exception:
        pass
    return 0


def _in_place_name(name: str) -> bool:
    """``normalize_``: a function named to write in place (a dunder, ``__getitem__``, is not)."""
    return name.endswith("_") and not name.endswith("__")


def _DEAD():
    return None


# NOTE [The caller's data written through an alias]
# A function that takes an alias of data it was handed and writes the alias in place changes the
# caller's data: ``img = self.images[i]; img.sub_(mean).div_(std)`` in a Dataset's ``__getitem__``
# normalises the stored samples again at every epoch (pytorch/vision#680); ``x = torch.from_numpy(a);
# x.clamp_(0, 255)`` in a ``predict(a)`` changes the caller's array. The alias is a kept value like any
# other (a view of a tensor without a graph; a tensor over an array's memory, its ``source`` the array),
# and a write through it is normally the program's own business. It is recorded as a change of the
# caller's data when: the write reads the old value (``sub_``, ``clamp_``, ``mul_``; not ``copy_``,
# ``fill_``, ``zero_`` or a random fill, which fill an output buffer); it runs in a function (not at
# module level, not one named with a trailing ``_``, which says it writes in place) on a line after the
# alias was taken in that function; the aliased data (its base tensor, or the array) was not made in
# that function, has no graph and is no parameter; the function runs outside a module's call (a
# module's own buffers written in ``forward``: EMA statistics, a queue). It is reported as a
# ``kept-value-changed`` hazard with ``through: true`` when the aliased data is still alive at the end
# (its caller kept it); an array's owner is followed through NumPy's ``.base`` (``torch.from_numpy(
# self.frames[i])`` aliases the data set's ``frames``, not the row view that dies with the call). The alias may also be taken on the line that called the writing function and
# handed to it (``jitter(X[i:i + 8], 1.1)`` with ``x.mul_(scale)`` inside): the function then writes its
# argument, a view of the caller's data. One per aliasing line (its first write is the culprit, the
# others are counted); the checks run at the first write only.

# NOTE [A counted view offered to the kept values, compiled]
# (speedv20) Past a line's first events each view the line takes is offered to the kept values from the counted
# wrapper's hit (NOTE [A counted line's calls, compiled] in speedups.py): ``on_alias`` with the line's site. Its
# Python body costs a frame, two ``isinstance``, the ``grad_fn`` read, two weak references and the young tuple:
# about 5,300 instructions a view (small_mlp's two batch views, ``data[i]`` and ``labels[i]``, 10.6k a step;
# benchmarks/RESULTS.md, "speedv20"). Where the accelerator is built, the run's ``KeptValues`` is of a subclass whose
# ``on_alias`` is ``_speedups.kept_on_alias``'s method descriptor: the same reads in the same order with the same
# objects (``_KEEPING``, ``torch.Tensor``, ``young`` read from the instance at each call, ``settle`` at
# ``_MAX_YOUNG``), the same tuple appended, the same exceptions let out or swallowed; a call without the site
# (``Tracker.on_alias``'s) or with keywords goes to the Python body. A method descriptor (not a function in the
# instance) keeps ``kept.on_alias`` a bound method to every caller, and an attribute set on the instance (a
# benchmark's timer) still wins. Chosen when the tracker is made (``TENSORSCOPE_PURE_PYTHON=1`` then: the Python
# class).
_COMPILED_CLASS = []


def kept_values() -> KeptValues:
    """A run's ``KeptValues``: of the compiled subclass where the accelerator is built (see the NOTE above)."""
    make = _speedups.function("kept_on_alias")
    if make is None:
        return KeptValues()
    if not _COMPILED_CLASS:
        try:
            class CompiledKeptValues(KeptValues):
                pass
            CompiledKeptValues.on_alias = make(CompiledKeptValues, KeptValues.on_alias, _Tensor, _KEEPING, _MAX_YOUNG)
            _COMPILED_CLASS.append(CompiledKeptValues)
        except Exception:
            _COMPILED_CLASS.append(KeptValues)
    return _COMPILED_CLASS[0]()


_OVERWRITES = frozenset({
    "copy_", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_", "geometric_",
    "cauchy_", "log_normal_", "set_", "resize_", "resize_as_", "index_put_", "index_copy_", "index_fill_",
    "masked_fill_", "masked_scatter_", "scatter_", "put_", "setitem", "__setitem__", "fill_diagonal_",
})


def _on_death(entry, user):
    def died(_ref):
        try:
            f = _program_frame(sys._getframe(1), user)
            if f is not None:
                entry.died = (f.f_code.co_filename, f.f_lineno)
            entry.watch = None
        except Exception:
            pass
    return died


signals_wait(_on_death(None, None))  # a weak reference callback: a signal landing in it waits (exits.py)


def _program_frame(frame, user):
    """The innermost frame of the program's own code at or above ``frame``, through torch's frames of any kind."""
    while frame is not None:
        if frame.f_code.co_filename in user:
            return frame
        frame = frame.f_back
    return None
