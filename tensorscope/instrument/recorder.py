"""The recording state of one run: events, tensor ids and saved-tensor records.

Only weak references to tensors are kept (see NOTE [No tensor kept alive]).
Everything the recorder hands to the analysis is plain data: ids like ``t3``
and ``s1``, numbers and strings.

NOTE [No tensor kept alive]
Tensor ids are keyed by ``id(t)`` and guarded by a ``weakref.ref(t)``: a dead
tensor's id can be reused by Python, so a lookup is only valid while the
weak reference still points at the same object. Storage sharing is only
claimed among tensors alive at the same moment, because freed memory is
reused at once (same ``data_ptr`` and even the same StorageImpl address).
"""

from __future__ import annotations

import bisect
import threading
import weakref
from array import array
from collections import OrderedDict
from operator import add as _add, setitem as _setitem

try:
    from collections import _count_elements as count_site  # C: one site's count, counted in one step
except ImportError:  # another Python implementation: counted in Python (a thread switch can lose a count)
    def count_site(counts, sites):
        for site in sites:
            counts[site] = counts.get(site, 0) + 1

import torch

from tensorscope.instrument import speedups as _speedups
from tensorscope.instrument import state
from tensorscope import compat
from tensorscope.instrument.frames import _LINES, UserCode, call_segment, signals_wait, library_name, line_of
from tensorscope.instrument.lines import LineRecord
from tensorscope.instrument.quiet import function_modes as _function_modes, tf_off as _tf_off

_Tensor = torch.Tensor
_get_sequence_nr = torch._C._autograd._get_sequence_nr
_MAX_MARKS = 20_000


class _Marks:
    """The marks of ``Recorder.mark``: (autograd's next sequence nr, file, line, id of the frame, its instruction)
    of recorded program lines, in time order, as columns.

    NOTE [Marks as columns]
    Every event at a program line on the main thread adds a mark, up to _MAX_MARKS: as a 5-tuple each, with
    its four int objects, a mark took about 200 bytes (4 MB for a long program's 20,000, held until the program
    ends: benchmarks/RESULTS.md, "mem17"); as machine ints in arrays and the file's shared string, 36. A line
    that is None is kept as -1 (``line_of`` never gives -1) and read back as None.
    """

    __slots__ = ("seqs", "files", "lines", "frames", "lastis")

    def __init__(self):
        self.seqs = array("q")
        self.files: list = []
        self.lines = array("q")
        self.frames = array("Q")  # id() of the frame
        self.lastis = array("q")

    def __len__(self) -> int:
        return len(self.seqs)

    def append(self, aseq: int, file, line, frame_id: int, lasti: int) -> None:
        self.seqs.append(aseq)
        self.files.append(file)
        self.lines.append(-1 if line is None else line)
        self.frames.append(frame_id)
        self.lastis.append(lasti)

    def drop_oldest(self, n: int) -> None:
        for column in (self.seqs, self.files, self.lines, self.frames, self.lastis):
            del column[:n]

    def clear(self) -> None:
        self.drop_oldest(len(self.seqs))

    def bracket(self, seq: int):
        """(file, line) of the mark just after ``seq`` where the marks just before and just after it are one
        execution of one line (same file, line and frame, a later instruction); else None."""
        i = bisect.bisect_right(self.seqs, seq)
        if 0 < i < len(self.seqs):
            j = i - 1
            if (self.files[j] == self.files[i] and self.lines[j] == self.lines[i] and self.frames[j] == self.frames[i]
                    and self.lastis[j] < self.lastis[i]):
                line = self.lines[i]
                return self.files[i], (None if line == -1 else line)
        return None
_MAIN = threading.main_thread()
_CO_OPTIMIZED = 0x0001

# NOTE [Site counts from several threads]
# Each event at a program line is counted per site (``site_counts``), from whichever thread makes it.
# ``n = counts.get(site, 0) + 1; counts[site] = n`` reads and writes in two steps, and a thread switch
# between them loses the other thread's count: four threads calling one ``loss.backward()`` line 300
# times each were summarised as 1159 calls on Python 3.10 (tests/test_threads.py); the same two steps in
# a tight loop, four threads, lose a third of 800,000 counts on 3.10, 3.11, 3.12 and 3.13 alike. So a
# count is made by ``collections._count_elements`` (the C loop of ``Counter.update``): the read and the
# write happen inside one C call, with no Python code between them for a thread switch (the keys are
# tuples of str and int, whose hash runs no Python code); the count is then read back. The events only
# counted (``aggregated``) are summed the same way, under one key of ``aggregated_counts`` (``count_aggregated``),
# from every path that counts one: ``aggregated += 1`` lost counts the same way.
# Many events at one site at once (an optimizer step recorded whole: small_mlp's 24 writes a step) are added in
# one such C call too (``add_count``): ``map(setitem, (counts,), (key,), map(add, map(counts.get, (key,), (0,)),
# (n,)))`` driven by ``any``: the read (``dict.get``), the sum (``operator.add``) and the write
# (``operator.setitem``) are C functions called one after the other by ``map`` (METH_FASTCALL on 3.10 to 3.13,
# so no argument tuple is made), no Python code runs between the read and the write, and nothing allocated
# there is tracked by the garbage collector (only a new int), so no collection (which 3.10 and 3.11 run inside an
# allocation, with finalizers that are Python code) can fall between them either. Measured: two threads adding 3
# and two counting 1 each 50,000 times through one key, switch interval 1 us, lose nothing on 3.10, 3.11, 3.12
# and 3.13 (the two Python steps lost 9 % to 32 % of the counts on 3.10, 3.12 and 3.13). ``_count_elements``
# over ``repeat(site, n)`` cost about 600 instructions a count: 29k of a small_mlp step's 139k write log.
AGGREGATED = "aggregated"
_ONE_AGGREGATED = (AGGREGATED,)
_ZERO = (0,)


def add_count(counts: dict, key, n: int) -> None:
    """``counts[key] += n`` in one C call, so that no other thread's count is lost
    (NOTE [Site counts from several threads]). Nothing is added, not even the key, when ``n`` is 0."""
    if n <= 0:
        return
    keys = (key,)
    any(map(_setitem, (counts,), keys, map(_add, map(counts.get, keys, _ZERO), (n,))))


def count_aggregated(rec, n: int = 1) -> None:
    """Add ``n`` events to those ``rec`` only counted (NOTE [Site counts from several threads])."""
    if n == 1:
        count_site(rec.aggregated_counts, _ONE_AGGREGATED)
    else:
        add_count(rec.aggregated_counts, AGGREGATED, n)


# NOTE [Storage keys without storage objects]
# A storage is keyed by the address of its StorageImpl. ``t.untyped_storage()._cdata`` gives it,
# but makes a Python storage object that torch then keeps alive as long as the storage itself
# (PyObject preservation): one more object per storage in the program's ``gc.get_objects()`` and
# in every full collection of its heap (8,000 on a 4,000-parameter model, each in-place write
# keyed one). ``torch._C._storage_address`` reads the same address without one. Only the report's
# storage sizes need the storage object, read once the program has ended (``describe(storage=True)``).
# (torch 2.2 has no ``_storage_address``: see NOTE [Storage keys on releases without _storage_address])
storage_key = compat.storage_key
_speedups.setup_storage_key(storage_key)  # NOTE [A storage key read in place] in speedups.py

_INSPECTABLE = {_Tensor: True, torch.nn.Parameter: True}
_BASE_TF = _Tensor.__torch_function__.__func__


def inspectable(t) -> bool:
    """Plain tensors and the program's own subclasses; not torch's tracing tensors.

    FakeTensor, FunctionalTensor and other ``torch.*`` subclasses appear while
    ``torch.compile`` traces a function: what they do is not the program's eager
    behaviour, so they are left out of the report.
    """
    kind = type(t)
    verdict = _INSPECTABLE.get(kind)
    if verdict is None:
        # a subclass with its own __torch_function__ would see every metadata read of ours
        own_tf = getattr(getattr(kind, "__torch_function__", None), "__func__", None) is not _BASE_TF
        module = getattr(kind, "__module__", "") or ""
        verdict = _INSPECTABLE[kind] = (isinstance(t, _Tensor) and not own_tf and not module.startswith("torch."))
        if own_tf and isinstance(t, _Tensor) and not module.startswith("torch."):
            _not_inspected(kind, module)
    return verdict


# NOTE [Subclasses left out, said]
# A tensor subclass with its own ``__torch_function__`` (the program's, or a library's: a logging tensor,
# torchvision's ``tv_tensors``) is not inspected: each metadata read of tensorscope's would run its code, which the
# program could see. Its ops, writes and backward calls are therefore missing from the report, which said nothing
# of it ("clean: 1 backward call" for two). The first time a run meets such a type, the report says so. Verdicts
# are cached per type for the whole process: the program's types are forgotten when a run starts
# (``forget_program_kinds``), so that each run meets, and names, its own.
_SEEDED = frozenset(_INSPECTABLE)


def _not_inspected(kind, module: str) -> None:
    rec = state.recorder
    if rec is not None:
        name = getattr(kind, "__qualname__", None) or kind.__name__
        rec.note(f"tensors of {name if module in ('__main__', '') else module + '.' + name}, a subclass with its own "
                 "__torch_function__, are not inspected (reading them would run its code): their ops, writes and "
                 "backward calls are not in this report")


def forget_program_kinds() -> None:
    """Drop the cached verdicts of every type but the seeded ones (NOTE [Subclasses left out, said])."""
    for kind in list(_INSPECTABLE):  # one copy in C: another thread may add a type meanwhile
        if kind not in _SEEDED:
            _INSPECTABLE.pop(kind, None)


def node_name(node) -> str:
    """A backward node's name as PyTorch prints it in ``grad_fn=<...>``: ``CopyBackwards``, not
    ``torch::autograd::CopyBackwards``."""
    return type(node).__name__


_DTYPE_NAMES: dict = {}  # torch.float32 -> "float32": one shared string per dtype, not one per tensor
_DEVICE_NAMES: dict = {}  # torch.device("cpu") -> "cpu"


def _dtype_name(dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


def _device_name(device) -> str:
    name = _DEVICE_NAMES.get(device)
    if name is None:
        name = _DEVICE_NAMES[device] = str(device)
    return name


class TensorFacts:
    """Plain facts about one tensor as last described (``describe``), under the report's field names.

    NOTE [Tensor facts as slotted records]
    One record per tensor the run noted, kept until the recording is frozen: at the end-of-run
    snapshot that is every live tensor (20,000 on a 5,000-parameter model trained with Adam). As a
    dict with its three lists a tensor's facts took about 900 bytes (the dict alone 464, grown
    key by key); as this record, with tuples, about 400 (3 MB of the snapshot's memory saved per
    10,000 tensors). A fact that could not be read stays None, as ``dict.get`` gave it before.
    """

    __slots__ = ("shape", "dtype", "device", "requires_grad", "is_leaf", "grad_fn", "version", "stride",
                 "storage_offset", "nbytes", "byte_range", "data_ptr", "storage_key", "storage_nbytes",
                 "storage_ptr", "is_view", "storage", "view_of")

    def __init__(self):
        self.shape = self.dtype = self.device = self.requires_grad = self.is_leaf = self.grad_fn = None
        self.version = self.stride = self.storage_offset = self.nbytes = self.byte_range = self.data_ptr = None
        self.storage_key = self.storage_nbytes = self.storage_ptr = self.storage = self.view_of = None
        self.is_view = False


def describe(t, storage: bool = False) -> TensorFacts:
    """Plain facts about a tensor, never raising (functorch wrappers, sparse and nested tensors included).

    ``storage``: also the storage's size and address (see NOTE [Storage keys without storage objects]).
    Read unseen by the program's torch-function modes (NOTE [Our reads unseen by the program's
    torch-function modes] in quiet.py).
    """
    if _function_modes():
        with _tf_off():
            return _describe(t, storage)
    return _describe(t, storage)


def _describe(t, storage: bool) -> TensorFacts:
    d = TensorFacts()
    try:
        shape = t.shape
        d.shape = tuple(shape)
        d.dtype = _dtype_name(t.dtype)
        d.device = _device_name(t.device)
        d.requires_grad = bool(t.requires_grad)
        d.is_leaf = bool(t.is_leaf)
        gf = t.grad_fn
        d.grad_fn = node_name(gf) if gf is not None else None
    except Exception:
        shape = None
    try:
        d.version = t._version
    except Exception:
        d.version = None
    try:
        stride = tuple(t.stride())
        itemsize = t.element_size()
        offset = t.storage_offset()
        numel = t.numel()
        d.stride = stride
        d.storage_offset = offset
        d.nbytes = numel * itemsize
        d.byte_range = tuple(byte_span(shape if shape is not None else t.shape, stride, offset, numel, itemsize))
        d.data_ptr = t.data_ptr()
    except Exception:
        pass
    try:
        d.storage_key = storage_key(t)
        if storage:
            st = t.untyped_storage()
            d.storage_nbytes = st.nbytes()
            ptr = st.data_ptr()
            # a tensor at its storage's start (a parameter, a gradient, an optimizer's state): the one int object
            # for both addresses, held until the report is written (NOTE [Equal facts shared at the end of the run])
            d.storage_ptr = d.data_ptr if ptr == d.data_ptr else ptr
    except Exception:
        d.storage_key = None
    try:
        d.is_view = bool(t._is_view())
    except Exception:
        d.is_view = False
    return d


# NOTE [Equal facts shared at the end of the run]
# The end-of-run snapshot describes every live tensor (20,000 on a model of 5,000 parameters trained with Adam),
# and the description is held until the report is written: the run's peak memory. Most of a model's tensors have
# one of a few shapes, so their shape, stride and byte range tuples (and sizes past the small ints Python
# caches) are equal: described at the end, each is the one object of that value (``_share``), a few MB less at
# the peak (benchmarks/RESULTS.md, "mem15, 2026-11-26"). Tuples and ints: nothing can change them, so sharing
# is invisible. Not during the run, where a description costs on the program's time and is not held long.
_SHARED_FACTS = ("shape", "stride", "byte_range", "nbytes", "storage_nbytes", "storage_offset")


def _share(facts, table: dict) -> None:
    for name in _SHARED_FACTS:
        v = getattr(facts, name)
        if v is not None:
            setattr(facts, name, table.setdefault(v, v))


def _on_storage(t, key) -> bool:
    try:
        return storage_key(t) == key
    except Exception:
        return False


def byte_range(t):
    """[start, end) in bytes of the memory a tensor spans in its storage, or None."""
    try:
        return byte_span(t.shape, t.stride(), t.storage_offset(), t.numel(), t.element_size())
    except Exception:
        return None


def byte_span(shape, stride, offset, numel, itemsize) -> list:
    """[start, end) in bytes from a tensor's geometry: an empty tensor spans nothing at its offset."""
    start = offset * itemsize
    if numel == 0:
        return [start, start]
    return [start, start + (sum((s - 1) * st for s, st in zip(shape, stride)) + 1) * itemsize]


def ranges_overlap(a, b) -> bool:
    return a is not None and b is not None and a[0] < b[1] and b[0] < a[1]


class _KeyedRef(weakref.ref):
    """A weak reference that knows the ``id()`` it is filed under and the tensor's id (``t3``): one
    object per tensor seen, where a callback closure and an (ref, tid) pair cost three more. Objects
    made while the program runs stay in its heap, which its garbage collector walks."""

    __slots__ = ("key", "tid")

    def __new__(cls, obj, callback, key, tid):
        return super().__new__(cls, obj, callback)

    def __init__(self, obj, callback, key, tid):
        super().__init__(obj, callback)
        self.key = key
        self.tid = tid


# NOTE [A keyed reference made in C]
# ``_KeyedRef(t, callback, key, tid)`` runs two Python frames (its ``__new__`` and ``__init__``, each with a
# ``super()`` call) for every tensor given an id: in a training loop, each step's loss at its backward call.
# ``weakref.ref.__new__`` called on the subclass makes the same object in C (a subclass's reference is always
# a new one, never a shared one), and ``weakref.ref.__init__`` only checks its arguments, so the reference is
# made there and its two slots set after.
_new_ref = weakref.ref.__new__


def _forgetter(ids: dict):
    @signals_wait  # a signal that lands here is heard once it returns (exits.py)
    def forget(ref):
        """A tensor died: its id() may be reused by the next object, so its entry goes."""
        if ids.get(ref.key) is ref:
            del ids[ref.key]

    return forget


_FAILURES_WITH_GRAPHS = 32  # see NOTE [The last failure, not the first]
_RECENT_FAILURES = 4

# NOTE [Events as packed tuples]
# A program of 20,000 lines logs up to 20,000 events while it runs (max_events), and they stay until
# it ends: as a dict of 15 to 18 keys each took 464 bytes, plus 56 for each empty list in it (a
# write's names, also_changed, also_bumped, saved_hits). ``emit`` logs a tuple instead: the values in
# order, then the tuple of their keys (one per distinct key sequence, shared: ``_SHAPES``), 160
# bytes for a write, with an empty sequence written as ``()``. ``event_dict`` gives the dict back
# when the recording is frozen (instrument.session.record), so everything after it reads the same
# dicts as before, key for key and in order. An event completed after it is logged (a backward
# call's outcome, a decorator's grad mode) is a dict from the start (``emit_open``). Nothing reads
# the log while the program runs but its length.
_HEAD = ("seq", "kind", "file", "line")
_SHAPES: dict[tuple, tuple] = {}


def event_dict(event) -> dict:
    """An event of the log as a dict (see NOTE [Events as packed tuples])."""
    if type(event) is tuple:
        return dict(zip(event[-1], event))
    return event


class Recorder:
    """Holds what one run of a program recorded."""

    def __init__(self, program_path: str | None, *, max_events: int = 20000, per_site: int = 20):
        forget_program_kinds()  # NOTE [Subclasses left out, said]
        self.user = UserCode(program_path)
        self.ddp_models: list[dict] = []  # one per DistributedDataParallel built (instrument/ddp.py)
        self.distributed_backend: str | None = None
        self.max_events = max_events
        self.per_site = per_site
        self.events: list[dict] = []
        self.seq = 0
        self.site_counts: dict = {}
        self.counted_site = None  # the site ``allow`` last counted past its cap (NOTE [A counted line's calls])
        self.aggregated_counts: dict = {}  # events only counted: see ``aggregated``
        self.log_full = False  # an event was refused because the log held max_events already
        self.lock = threading.Lock()
        # tensors
        self._ids: dict[int, _KeyedRef] = {}
        self._forget = _forgetter(self._ids)  # one callback for every tensor's weak reference
        self._n_tensors = 0
        self.tensor_facts: dict[str, TensorFacts] = {}  # tid -> last description (plain data)
        self.describe_storage = False  # the end-of-run snapshot: storage sizes too (see describe)
        self._shared: dict = {}  # equal shapes, strides, byte ranges and sizes described at the end, one each
        self.tensor_created: dict[str, dict] = {}  # tid -> {"file","line","how","source"}
        self.tensor_names: dict[str, list] = {}  # tid -> names seen at events
        # storages: key -> (sid, the weak reference of its one tensor or a list of several); see storage_id
        self._storages: dict[int, tuple] = {}
        self._n_storages = 0
        # saved tensors: storage key -> {packed id: weakref(packed)}
        self.pending: dict[int, dict] = {}
        self._n_saved = 0
        self.node_lines: OrderedDict = OrderedDict()  # node sequence nr -> (file, line)
        self.marks = _Marks()  # (autograd's next sequence nr, file, line, frame, instruction) of recorded user lines
        self.lines = LineRecord(self.user)  # every node's forward line, where line events exist (3.12+)
        # backward bookkeeping
        self.freed_nodes: list[tuple[set, dict]] = []  # (sequence nrs, backward event)
        # outcomes
        self.saved_failure: dict | None = None
        self.failure: dict | None = None  # the latest (NOTE [The last failure, not the first])
        self.failures = 0  # failures recorded, caught ones included
        self._failure_key: tuple | None = None
        self._recent_failures: list[tuple] = []  # (type name, message, failure), the last _RECENT_FAILURES
        self.hazards: list[dict] = []
        self._hazard_keys: set = set()
        self.notes: list[str] = []
        self.features: set[str] = set()

    # --- ids ------------------------------------------------------------------

    def tid(self, t) -> str:
        """The stable id (``t3``) of a live tensor, assigned in first-seen order."""
        k = id(t)
        ref = self._ids.get(k)
        if ref is not None and ref() is t:
            return ref.tid
        self._n_tensors += 1
        tid = f"t{self._n_tensors}"
        try:
            ref = _new_ref(_KeyedRef, t, self._forget)  # NOTE [A keyed reference made in C]
            ref.key, ref.tid = k, tid
            self._ids[k] = ref
        except TypeError:  # not weak-referenceable: never matched again
            pass
        return tid

    def release_tables(self) -> None:
        """The run's recording is frozen and nothing reads the id and storage tables again (the
        command line, see instrument.session.record): each tensor's weak reference and id, each
        storage's id and references go before the report is built (hooks of graphs still alive
        number on empty tables, as they record into empty ones)."""
        self._ids.clear()
        self._storages.clear()
        self._shared.clear()

    def known_tid(self, t) -> str | None:
        """The id of a tensor already seen and alive, or None (no id is assigned)."""
        ref = self._ids.get(id(t))
        return ref.tid if ref is not None and ref() is t else None

    def live_tensors(self) -> dict:
        """tid -> tensor for every tensor seen and still alive."""
        out = {}
        for ref in list(self._ids.values()):
            t = ref()
            if t is not None:
                out[ref.tid] = t
        return out

    def iter_live(self):
        """(tid, tensor) for every tensor seen and still alive, in ``live_tensors``' order, without its dict
        (20,000 entries at the end of a run, at the peak of the snapshot and of the memory object's numbering:
        benchmarks/RESULTS.md, "rss21"). The id table as it was when the iteration started, as there."""
        for ref in list(self._ids.values()):
            t = ref()
            if t is not None:
                yield ref.tid, t

    def note_tensor(self, t) -> str:
        """Assign an id, remember the tensor's facts and storage; return the id."""
        tid = self.tid(t)
        facts = describe(t, self.describe_storage)
        if self.describe_storage:  # the end-of-run snapshot: NOTE [Equal facts shared at the end of the run]
            _share(facts, self._shared)
        key = facts.storage_key
        if key is not None:
            facts.storage = self.storage_id(key, t)
        if facts.is_view:
            try:
                base = t._base
                if base is not None:
                    facts.view_of = self.tid(base)
                    if facts.view_of not in self.tensor_facts:
                        self.note_tensor(base)
            except Exception:
                pass
        self.tensor_facts[tid] = facts
        return tid

    def storage_id(self, key: int, t) -> str:
        """``s1``-style id of a storage, shared only among tensors alive at the same time.

        NOTE [A storage's one tensor by the id table's reference]
        Each storage seen is an entry ``(sid, refs)``: ``refs`` is the weak reference of its one
        tensor seen alive on it, or a list of them where several are (views, ``x.data = y``). The
        one reference is the id table's ``_KeyedRef`` of that tensor, which exists already
        (``note_tensor`` gives the tensor its id first): a storage of one tensor costs a tuple, where
        ``[sid, [weakref.ref(t)]]`` cost two lists and a second reference (~180 bytes more; 3.6 MB
        at the end of a run with 20,000 live tensors, benchmarks/RESULTS.md "mem16, 2026-11-26").
        A dead reference reads as before (``r()`` is None), whichever table made it.
        """
        entry = self._storages.get(key)
        if entry is not None:
            sid, refs = entry
            if type(refs) is not list:  # the one tensor seen on it
                if refs() is t:  # alive (a parameter): as below
                    return sid
                refs = [refs]
            refs = [r for r in refs if r() is not None and _on_storage(r(), key)]
            if refs:
                if not any(r() is t for r in refs):
                    try:
                        refs.append(self._ref(t))
                    except TypeError:
                        pass
                refs = refs[-64:]
                self._storages[key] = (sid, refs[0] if len(refs) == 1 else refs)
                return sid
        self._n_storages += 1
        sid = f"s{self._n_storages}"
        try:
            self._storages[key] = (sid, self._ref(t))
        except TypeError:
            self._storages[key] = (sid, [])
        return sid

    def _ref(self, t):
        """A weak reference to ``t``: the id table's own where it has one (NOTE [A storage's one tensor by the id
        table's reference]); raises TypeError where ``t`` cannot be referenced weakly."""
        ref = self._ids.get(id(t))
        if ref is not None and ref() is t:
            return ref
        return weakref.ref(t)

    def known_storage(self, key: int) -> str | None:
        """The id (``s1``) of a storage seen before, or None."""
        entry = self._storages.get(key)
        return entry[0] if entry is not None else None

    def tensors_on_storage(self, key: int):
        entry = self._storages.get(key)
        if entry is None:
            return []
        out = []
        refs = entry[1]
        for r in (refs if type(refs) is list else (refs,)):
            t = r()
            if t is None:
                continue
            if _on_storage(t, key):  # `x.data = y` / set_ move a tensor to another storage
                out.append(t)
        return out

    # --- events ---------------------------------------------------------------

    @property
    def aggregated(self) -> int:
        """Events only counted, past the per-site or the total limit (NOTE [Site counts from several threads])."""
        return self.aggregated_counts.get(AGGREGATED, 0)

    def allow(self, kind: str, frame) -> bool:
        """Count an event at this site; True while it may be recorded in full detail.

        Called for every alias, copy and creation the program's own lines make, so ``line_of`` and
        ``allow_at`` are inlined for a line seen before (see NOTE [Hot path] in patches.py)."""
        code = frame.f_code
        line = _LINES.get((id(code), frame.f_lasti))
        site = (kind, code.co_filename, line_of(frame) if line is None else line)
        counts = self.site_counts
        count_site(counts, (site,))  # NOTE [Site counts from several threads]
        n = counts[site]
        if n > self.per_site:
            count_site(self.aggregated_counts, _ONE_AGGREGATED)  # count_aggregated, inlined
            self.counted_site = site  # see NOTE [A counted line's calls] in calls.py
            return False
        if len(self.events) >= self.max_events:
            count_site(self.aggregated_counts, _ONE_AGGREGATED)
            self.log_full = True
            return False
        return True

    def allow_at(self, kind: str, file: str, line: int) -> bool:
        """``allow`` for a frame whose line is known."""
        site = (kind, file, line)
        count_site(self.site_counts, (site,))  # NOTE [Site counts from several threads]
        n = self.site_counts[site]
        if n > self.per_site or len(self.events) >= self.max_events:
            count_site(self.aggregated_counts, _ONE_AGGREGATED)
            if n <= self.per_site:
                self.log_full = True
            return False
        return True

    def note_caps(self) -> None:
        """Say in the report's notes where a cap left events counted but not recorded (at the end). A clean
        ``explain`` leaves these two out by their first words (render/summary.py ``_LOG_DETAIL_NOTES``)."""
        over = [n - self.per_site for n in self.site_counts.values() if n > self.per_site]
        if over:
            lines = f"{len(over):,} line" + ("s" if len(over) > 1 else "")
            self.note(f"{sum(over):,} events past the first {self.per_site} at a line were counted, not recorded "
                      f"({lines}; the counts per line are in events_summary)")
        if self.log_full:
            self.note(f"the event log is full: the first {self.max_events:,} events were recorded, later ones "
                      f"only counted")

    def emit(self, kind: str, frame, **data) -> None:
        """Log an event: its number, kind, the program's file and line, then ``data`` (see NOTE [Events
        as packed tuples])."""
        self.seq += 1
        keys = tuple(data)
        shape = _SHAPES.get(keys)
        if shape is None:
            shape = _SHAPES[keys] = (*_HEAD, *keys)
        self.events.append((self.seq, kind, frame.f_code.co_filename if frame else None,
                            line_of(frame) if frame else None, *data.values(), shape))
        if frame is not None and threading.current_thread() is _MAIN:
            self.mark(_get_sequence_nr(), frame)

    def emit_open(self, kind: str, frame, **data) -> dict:
        """``emit`` for an event its caller completes later (a backward call's outcome): a dict, returned."""
        self.seq += 1
        event = {"seq": self.seq, "kind": kind, "file": frame.f_code.co_filename if frame else None,
                 "line": line_of(frame) if frame else None}
        event.update(data)
        self.events.append(event)
        if frame is not None and threading.current_thread() is _MAIN:
            self.mark(_get_sequence_nr(), frame)
        return event

    def mark(self, aseq, frame):
        """Remember which instruction of the program ran when autograd's next sequence nr was
        `aseq` (see Tracker.node_line). Kept in time order, on the program's thread only: other
        threads (CUDA backward workers) count sequence nrs of their own."""
        marks = self.marks
        seqs = marks.seqs
        if seqs and aseq < seqs[-1]:
            return
        if len(seqs) >= _MAX_MARKS:
            marks.drop_oldest(_MAX_MARKS // 2)
        marks.append(aseq, frame.f_code.co_filename, line_of(frame), id(frame), frame.f_lasti)

    def node_line(self, seq):
        """(file, line) of the forward line that built node ``seq``: exact where a pack hook saw it
        (explain) or where the program's line events were heard (Python 3.12 and later, see NOTE
        [Forward lines from line events] in lines.py); else when the events recorded just before
        and just after the node was built ran in one execution of one line (same frame, same line,
        later instruction: not the same line in the next iteration of a loop); else (None, None)."""
        known = self.node_lines.get(seq)
        if known is not None:
            return known
        known = self.lines.node_line(seq)
        if known is not None:
            return known
        found = self.marks.bracket(seq)
        return found if found is not None else (None, None)

    def location(self, frame, uf) -> dict:
        """Where an event happened: the program's file, line and call (``uf``, its innermost frame),
        and the library function it ran inside (``frame``, when that is not the program's)."""
        loc = {"file": None, "line": None, "segment": None, "library": None}
        if uf is not None:
            loc["file"] = uf.f_code.co_filename
            loc["line"] = line_of(uf)
            loc["segment"] = call_segment(uf)
        if frame is not None and uf is not frame:
            loc["library"] = library_name(frame)
        return loc

    def add_names(self, tid, names) -> None:
        """Remember the program's names of a tensor (in the order first seen)."""
        if not names:
            return
        known = self.tensor_names.setdefault(tid, [])
        for n in names:
            if n not in known:
                known.append(n)

    def names_in(self, frame, tensors) -> dict[int, list[str]]:
        """Names bound to each of `tensors` in a module-level frame (by identity).

        NOTE [No f_locals of running functions]
        Reading ``f_locals`` of a running function frame (Python 3.11) leaves a snapshot
        dict on the frame that keeps every local of that moment alive until the function
        returns: a training loop would hold on to old batches. So function frames are
        never read while the program runs; their names come from the source text.
        """
        if frame.f_code.co_flags & _CO_OPTIMIZED:
            return {}
        wanted = {id(t) for t in tensors}
        found: dict[int, list[str]] = {}
        try:
            items = list(frame.f_locals.items())
        except Exception:
            return found
        for name, value in items:
            if id(value) in wanted and isinstance(value, _Tensor):
                found.setdefault(id(value), []).append(name)
        return found

    # --- failures and hazards ---------------------------------------------------

    # NOTE [The last failure, not the first]
    # A program may catch a failure and go on: a retry loop, a script that checks that a call raises, a
    # thread whose exception ``threading.excepthook`` prints while the main thread carries on. The
    # diagnosis is about the exception that ended the program (verdict.ended_the_program). Keeping the
    # first failure, as the recorder did, lost the facts of the fatal one whenever a caught one came
    # before it: a thread's backward twice, then the main thread's version error, was named at the
    # backward line with no saved tensor and no writer. So ``failure`` is the latest, and the last
    # ``_RECENT_FAILURES`` are kept: at the end of the run the one that ended the program, matched
    # by type and message as the verdict matches it, becomes ``failure`` (``choose_failure``), so a
    # failure caught after the fatal one (in a ``finally:`` block, another thread) does not hide it.
    # One exception seen by two wrappers (a write inside a function decorated with ``inspect()``) is
    # one failure: the innermost call's facts stay (same exception object, type and message). Past
    # ``_FAILURES_WITH_GRAPHS`` failures the walks of the failing graph (freed nodes, holders, the
    # stale saved tensor's graph) are skipped: a loop that catches a failure at every step costs what
    # it did before.

    def new_failure(self, e: BaseException) -> bool:
        """Whether ``e`` is a failure not yet recorded (see NOTE [The last failure, not the first])."""
        key = (id(e), type(e).__name__, str(e)[:2000])
        if key == self._failure_key:
            return False
        self._failure_key = key
        self.failures += 1
        return True

    def record_failure(self, failure: dict) -> None:
        """``failure`` is the latest (``new_failure`` said it is new)."""
        self.failure = failure
        recent = self._recent_failures
        recent.append((self._failure_key[1], self._failure_key[2], failure))
        if len(recent) > _RECENT_FAILURES:
            del recent[0]

    def choose_failure(self, exc: BaseException | None) -> None:
        """The run is over: the failure that ended it, if one of the last recorded did, is ``failure``."""
        if exc is None or not self._recent_failures:
            return
        try:
            key = (type(exc).__name__, str(exc)[:2000])
        except Exception:  # an exception whose __str__ raises: python prints it as such, we match nothing
            return
        for name, message, failure in reversed(self._recent_failures):
            if (name, message) == key:
                if failure is not self.failure:
                    self.failure = failure
                    self.saved_failure = failure.get("saved")
                return

    def failure_graphs(self) -> bool:
        """Whether this failure's graph is walked for its facts (the first ``_FAILURES_WITH_GRAPHS``)."""
        return self.failures <= _FAILURES_WITH_GRAPHS

    def add_hazard(self, key, hazard: dict) -> None:
        if key in self._hazard_keys:
            return
        self._hazard_keys.add(key)
        self.hazards.append(hazard)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
