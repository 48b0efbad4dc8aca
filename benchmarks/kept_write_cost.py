"""The code issue 20 (family 1) adds to the write path, timed alone: min of 7 repeats.

Run: PYTHONPATH=. python benchmarks/kept_write_cost.py
"""
import timeit
import torch
from tensorscope.instrument.tracker import Tracker
from tensorscope.instrument.recorder import storage_key
from tensorscope.instrument import indexwrite

tr = Tracker(None)
w = torch.zeros(16)
key = storage_key(w)
n = 1_000_000
common = min(timeit.repeat("key in tr.kept.keys", globals=globals(), number=n, repeat=7)) / n * 1e9
op = "add_"
opcheck = min(timeit.repeat("op in INDEX_WRITES", globals={**globals(), "INDEX_WRITES": indexwrite.INDEX_WRITES}, number=n, repeat=7)) / n * 1e9
import sys
frame = sys._getframe(0)
kept = w.detach()
tr.kept.keep(tr, "detach", kept, w, frame)
tr.kept.on_write(tr, w, "add_", frame, None, key)  # the first write: recorded
m = 100_000
later = min(timeit.repeat("tr.kept.on_write(tr, w, 'add_', frame, None, key)", globals=globals(), number=m, repeat=7)) / m * 1e9
print(f"every write: kept lookup {common:.0f} ns + index-op test {opcheck:.0f} ns; "
      f"a write into a storage with a kept alias already found changed: {later:.0f} ns")

# The three later checks (shared state, running statistics, ctx attributes), timed the same way.
from tensorscope.instrument.runningstats import CODES as RUNNING_STATS_CODES

shared_lookup = min(timeit.repeat("key in tr.shared.keys", globals=globals(), number=n, repeat=7)) / n * 1e9
code_test = min(timeit.repeat("id(frame.f_code) in CODES", globals={**globals(), "CODES": RUNNING_STATS_CODES},
                              number=n, repeat=7)) / n * 1e9
# a storage two modules share, already written by two lines: later writes are counted only
a, b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
tr.shared.on_register_parameter(tr, a, "weight", a.weight, frame)
tr.shared.on_register_parameter(tr, b, "weight", a.weight, frame)
for e in tr.shared.keys[storage_key(a.weight)]:
    e.sites = [{"file": "x", "line": 1}, {"file": "x", "line": 2}, {"file": "x", "line": 3}, {"file": "x", "line": 4}]
wkey = storage_key(a.weight)
shared_write = min(timeit.repeat("tr.shared.on_write(tr, a.weight, 'add_', frame, None, wkey)", globals=globals(),
                                 number=10_000, repeat=7)) / 10_000 * 1e9
# one BatchNorm update seen (its forward's frame read for `self` and `input`)
bn = torch.nn.BatchNorm1d(8)
xb = torch.randn(16, 8)


def bn_frame(self=bn, input=xb):
    return sys._getframe(0)


bf = bn_frame()
bn_update = min(timeit.repeat("tr.running_stats.on_update(tr, bf, frame)", globals=globals(), number=10_000,
                              repeat=7)) / 10_000 * 1e9
torch.set_num_threads(1)  # a loaded machine makes intra-op threads spin: the plain call on one thread
whole_bn = min(timeit.repeat("bn(xb)", globals=globals(), number=1_000, repeat=7)) / 1_000 * 1e9
print(f"every write: shared-state lookup {shared_lookup:.0f} ns + BatchNorm code test {code_test:.0f} ns; "
      f"a write into shared memory already reported: {shared_write:.0f} ns; one BatchNorm update checked: "
      f"{bn_update:.0f} ns (a BatchNorm1d(8) call on 16 rows, plain: {whole_bn:.0f} ns)")
