"""What one growth sample of the GPT workload costs (NOTE [Sampling growth] in instrument/growth.py), in process.

Usage::

    python benchmarks/growth_walk.py [REPEATS]

Runs ``gpt_train``'s loop for 10 steps under a recording tracker, keeping the frame of the last backward call's
boundary, then takes the sample's walk and reading (``retention.frame_roots``, ``Walk.run``, ``Growth._sample``)
from that frame REPEATS times (default 200) and prints the minimum and median CPU time (``time.thread_time``) and
the Python and C calls of one (a figure load does not move; generator resumptions count as Python calls). Then runs
the 40 steps of the workload under a fresh tracker and prints the CPU time of each sample the run took. Compare two
trees by running this file with each on ``PYTHONPATH``. Run from the repository root.
"""
import os
import sys
import time

import torch

from tensorscope.instrument import growth, retention, session

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 200
del sys.argv[1:]  # gpt_train.py reads its scale from argv[1]
torch.set_num_threads(1)
path = os.path.abspath("benchmarks/workloads/gpt_train.py")
src = open(path).read()
g = {"__name__": "__main__", "__file__": path}
exec(compile(src[:src.index("final = train()")], path, "exec"), g)
train = g["train"]
g["STEPS"] = 10
frames = []
boundary = growth.Growth.boundary
growth.Growth.boundary = lambda self, frame: frames.append(frame)
tr = session.new_tracker(path)
with session.active(tr):
    train()
growth.Growth.boundary = boundary
frame = frames[-1]


def one():
    with torch._C.DisableTorchFunction():
        walk = retention.Walk(tr.user, budget=growth.WALK_BUDGET).run(retention.frame_roots(frame, tr.user))
        tr.growth._sample(walk)
        walk.release()
    return walk


w = one()
calls = {"python": 0, "c": 0}


def profile(f, event, arg):
    if "tensorscope" in f.f_code.co_filename:
        if event == "call":
            calls["python"] += 1
        elif event == "c_call":
            calls["c"] += 1


sys.setprofile(profile)
one()
sys.setprofile(None)
times = []
for _ in range(repeats):
    t = time.thread_time()
    one()
    times.append(time.thread_time() - t)
times.sort()
print(f"one sample from a boundary of the loop: {w.visited} objects, {sum(w.nodes.values())} graph nodes, "
      f"{len(w.storages)} storages; CPU min {times[0] * 1e3:.2f} ms, median {times[len(times) // 2] * 1e3:.2f} ms; "
      f"{calls['python']} Python calls, {calls['c']} C calls")

g["STEPS"] = 40
taken = []


def timed(self, frame):
    n, t = len(self.samples), time.thread_time()
    try:
        return boundary(self, frame)
    finally:
        if len(self.samples) > n:
            taken.append((self.boundaries, (time.thread_time() - t) * 1e3))


growth.Growth.boundary = timed
tr = session.new_tracker(path)
with session.active(tr):
    train()
growth.Growth.boundary = boundary
print("the samples of a 40-step run (boundary: CPU ms):", ", ".join(f"{b}: {ms:.2f}" for b, ms in taken),
      f"-- {sum(ms for _, ms in taken):.1f} ms in all")
