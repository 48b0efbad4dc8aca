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
