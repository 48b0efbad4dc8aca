"""What one iteration of the ``short_lived`` workload costs under `tensorscope run`'s recording, part by part, in-process.

Usage::

    python benchmarks/short_lived_iters.py ITERATIONS ROUNDS MODE...

The iteration is ``short_lived``'s (``torch.full``, ``clone``, ``mul_``, ``b[1:].sum()``), run
``ITERATIONS`` times per mode per round, the modes interleaved. MODE is ``plain`` (no wrappers), ``off``
(the wrappers installed, the recorder inactive), ``full`` (what ``run`` records), ``barewrite`` (in-place
writes not recorded), ``noalias`` (aliases not recorded, kept views included), ``nocopy`` (copies and
creations not recorded) or ``nokeep`` (views not kept). Prints the minimum CPU time per iteration of each
mode and what it adds over ``plain``. Growth samples are off. Run from the repository root with one torch
thread.
"""
import sys, time, torch
from tensorscope.instrument import session, tracker as trk
torch.set_num_threads(1)
pt = time.process_time
def churn(n):
    total = 0.0
    for i in range(n):
        a = torch.full((8,), float(i % 7))
        b = a.clone()
        b.mul_(2)
        total += float(b[1:].sum())
    return total
def loop(n):
    t = pt(); churn(n); return (pt() - t) / n * 1e6
T = trk.Tracker
none = lambda *a, **k: None
def _bare(orig, op, args, kwargs, *rest): return orig(*args, **kwargs)
tr = session.new_tracker(__file__); tr.growth.enabled = False
fw = tr.write_call
oa, oc = T.on_alias, T.on_copy
okeep = tr.kept.on_alias
modes = sys.argv[3:]
res = {m: [] for m in modes}
with session.active(tr): churn(200)
for r in range(int(sys.argv[2])):
    for m in modes:
        if m == 'plain': res[m].append(loop(int(sys.argv[1]))); continue
        with session.active(tr):
            tr.active = m != 'off'
            if m == 'barewrite': tr.write_call = _bare
            if m == 'noalias': T.on_alias = none
            if m == 'nocopy': T.on_copy = none
            if m == 'nokeep': tr.kept.on_alias = none
            try: res[m].append(loop(int(sys.argv[1])))
            finally:
                tr.write_call = fw; T.on_alias = oa; T.on_copy = oc; tr.kept.on_alias = okeep
b = min(res['plain'])
for m, v in res.items(): print(f"{m:10s} {min(v):7.2f} us/iter  over plain {min(v)-b:6.2f}")
