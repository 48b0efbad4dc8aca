"""What one training step of the GPT workload costs under `tensorscope run`'s recording, part by part, in-process.

Usage::

    python benchmarks/gpt_steps.py ROUNDS MODE...

MODE is ``plain`` (no wrappers), ``off`` (the wrappers installed, the recorder inactive), ``full``
(what ``run`` records), ``barewrite`` (in-place writes not recorded), ``noalias`` (aliases and copies
not recorded), ``nobackward`` (backward calls not recorded), ``bareall`` (the last three together) or
``eachforeach`` (``clip_grad_norm_``'s ``_foreach_mul_`` recorded tensor by tensor, as before NOTE [A
foreach write as one write record]).
One step per mode per round, the modes interleaved; prints the minimum CPU time per step of each and
what it adds over ``plain`` (growth samples off: they are measured by growth's own ``seconds``).
Run from the repository root.
"""
import io, os, sys, time, contextlib
import torch
torch.set_num_threads(1)
from tensorscope.instrument import foreach_writes, session, tracker as trk
path = os.path.abspath('benchmarks/workloads/gpt_train.py')
src = open(path).read()
head = src[:src.index('final = train()')]
code = compile(head, path, 'exec')
g = {'__name__': '__main__', '__file__': path}
pt = time.process_time
exec(code, g)
g['STEPS'] = 1
train = g['train']
for _ in range(3): train()
def _bare(orig, op, args, kwargs, *rest):
    return orig(*args, **kwargs)
T = trk.Tracker
noop = lambda *a, **k: None
modes = sys.argv[2:]
res = {m: [] for m in modes}
tr = session.new_tracker(path)
tr.growth.enabled = False
full_write = tr.write_call
orig = {'on_alias': T.on_alias, 'on_copy': T.on_copy, 'write_many': foreach_writes.write_many}
for r in range(int(sys.argv[1])):
    for m in modes:
        if m == 'plain':
            t = pt(); train(); res[m].append(pt() - t); continue
        with session.active(tr):
            tr.active = m != 'off'
            tr.write_call = _bare if m in ('barewrite', 'bareall') else full_write
            if m in ('noalias', 'bareall'):
                T.on_alias = noop; T.on_copy = noop
            if m == 'eachforeach':
                foreach_writes.write_many = lambda *a: foreach_writes.NOT_WHOLE
            bc = tr.backward_calls.before
            if m in ('nobackward', 'bareall'):
                tr.backward_calls.before = lambda *a: None
            t = pt(); train(); dt = pt() - t
            T.on_alias = orig['on_alias']; T.on_copy = orig['on_copy']; foreach_writes.write_many = orig['write_many']
            tr.backward_calls.before = bc
            res[m].append(dt)
base = min(res['plain'])
for m, v in res.items():
    print(f'{m:11s} min {min(v)*1000:6.2f} ms  median {sorted(v)[len(v)//2]*1000:6.2f}  over plain {1000*(min(v)-base):+6.2f} ms')
