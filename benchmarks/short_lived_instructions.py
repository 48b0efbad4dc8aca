"""Instructions (valgrind's callgrind) of one iteration of ``short_lived``, per statement and per recorder
hook: a figure the machine's load does not move (the companion of step_instructions.py).

Usage::

    python benchmarks/short_lived_instructions.py [MODE] [ITERATIONS]

MODE is ``plain`` (no wrappers), ``off`` (the wrappers installed, the recorder inactive) or ``full`` (what
``run`` records; the default). The script runs itself under ``valgrind --tool=callgrind`` with
instrumentation off for the first 400 iterations (each line's detailed events used up, as in a long run),
then counts ITERATIONS iterations (default 200) of ``short_lived``'s loop as a whole (``loop``), then each
statement of the iteration on its own pass (``torch.full`` with the death of the last iteration's ``a``,
``a.clone()`` with the death of the last ``b``, ``b.mul_(2)``, ``float(b[1:].sum())`` with the slice's death),
and with ``full`` the instructions inside each recorder hook the iteration reaches (``Tracker.write_call``,
``write_site``, ``log_write``, ``KeptValues.on_alias``, ``KeptValues.settle``), each on a pass of its own.
Prints instructions per iteration, statements and hooks net of their toggles (a full collection before each
pass, so that one due is not counted in it). Growth samples are off. Needs
valgrind, its ``callgrind.h`` header and a C compiler; run from the repository root with the tree to
measure on ``PYTHONPATH``. Instruction counts are not time, but they are exact and repeatable to about 1 %.
"""
import ctypes
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_instructions import callgrind_dumps  # noqa: E402  the same callgrind run and client-request helper

STATEMENTS = ["a = torch.full((8,), ...)", "b = a.clone()", "b.mul_(2)", "total += float(b[1:].sum())"]


def _outer(mode, iters):
    rows = callgrind_dumps(__file__, [mode, iters])
    empty = dict(rows).get("toggle-pair", 0) / iters  # what one timed call's two toggles cost
    print(f"short_lived iteration, {mode}: instructions per iteration ({iters} iterations; statements and hooks "
          f"net of their toggles, {empty:.0f} a pair)")
    for label, total in rows:
        if label == "toggle-pair":
            continue
        per = total / iters
        if label.startswith(("hook ", "statement ")):
            per -= empty * int(label.rsplit("x", 1)[-1])
        print(f"  {label:55s} {per:12,.0f}")


def _inner(mode, iters):
    import torch

    torch.set_num_threads(1)
    cg = ctypes.CDLL(os.environ["TS_CG_LIB"])
    T = cg.toggle

    def churn(n, p=-1):  # short_lived's loop (benchmarks/workloads/short_lived.py), a statement timed by p
        total = 0.0
        for i in range(n):
            if p == 0: T()
            a = torch.full((8,), float(i % 7))
            if p == 0: T()
            if p == 1: T()
            b = a.clone()
            if p == 1: T()
            if p == 2: T()
            b.mul_(2)
            if p == 2: T()
            if p == 3: T()
            total += float(b[1:].sum())
            if p == 3: T()
        return total

    def timed(f):
        def g(*a, **k):
            T()
            try:
                return f(*a, **k)
            finally:
                T()
        return g

    def passes():
        churn(50)
        cg.start_instr()
        churn(50)
        gc.collect()  # a full collection due in a pass would be counted in it (300k an iteration once)
        cg.zero()
        T()
        churn(iters)
        T()
        cg.dump(b"loop (the whole iteration)")
        for p, name in enumerate(STATEMENTS):
            gc.collect()
            cg.zero()
            churn(iters, p)
            cg.dump(f"statement {name} x1".encode())
        gc.collect()
        cg.zero()
        f = timed(lambda: None)
        for _ in range(iters):
            f()
        cg.dump(b"toggle-pair")

    if mode == "plain":
        churn(400)
        passes()
        return
    from tensorscope.instrument import session
    tr = session.new_tracker(__file__)
    tr.growth.enabled = False
    with session.active(tr):
        churn(400)
        tr.active = mode != "off"
        passes()
        if mode != "full":
            return
        targets = [("Tracker.write_call (b.mul_)", tr, "write_call", 1),
                   ("Tracker.write_site (in write_call)", tr, "write_site", 1),
                   ("Tracker.log_write (in write_call)", tr, "log_write", 1),
                   ("KeptValues.settle (in write_call)", tr.kept, "settle", 1),
                   ("KeptValues.on_alias (b[1:])", tr.kept, "on_alias", 1)]
        for label, owner, key, calls in targets:
            orig = getattr(owner, key)
            setattr(owner, key, timed(orig))
            gc.collect()
            cg.zero()
            churn(iters)
            cg.dump(f"hook {label} x{calls}".encode())
            delattr(owner, key)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--inner":
        _inner(sys.argv[2], int(sys.argv[3]))
    else:
        _outer(sys.argv[1] if len(sys.argv) > 1 else "full", int(sys.argv[2]) if len(sys.argv) > 2 else 200)
