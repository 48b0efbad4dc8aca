"""Where an optimizer's in-place write spends its time under ``tensorscope run``'s wrappers, in-process.

Usage::

    python benchmarks/adam_writes.py [STEPS] [ROUNDS]

Times ``opt.step()`` of Adam (its single-tensor path: 6 in-place writes per parameter, 4 parameters,
so 24 writes a step, all from torch's own code, attributed to this file's ``opt.step()`` line) in four
ways, interleaved round by round, and prints the minimum CPU time per step of each (other load on the
machine only ever adds time) and what each adds per write:

- ``plain``: no tensorscope;
- ``off``: the wrappers installed, the recorder inactive (binding ``p.mul_`` and entering a wrapper);
- ``bare``: the recorder active, its ``write_call`` replaced by the bare call of the original (the
  wrapper's own work around the call);
- ``each``: what ``tensorscope run`` does with every write of the step recorded through its wrapper
  (the steps recorded whole switched off: NOTE [The write fast path] in instrument/tracker.py);
- ``full``: what ``tensorscope run`` does: once the step's line has used its detailed events, the step
  is recorded whole from the version counters (NOTE [An optimizer step as one write record]).
"""

from __future__ import annotations

import sys
import time

import torch

from tensorscope.instrument import session


def _steps(opt, n: int) -> float:
    start = time.process_time()
    for _ in range(n):
        opt.step()
    return (time.process_time() - start) / n * 1e6


def _bare(orig, op, args, kwargs, *rest):
    return orig(*args, **kwargs)


def _no_step(*args):
    return None


def main(steps: int, rounds: int) -> None:
    torch.set_num_threads(1)
    params = [torch.nn.Parameter(torch.randn(8, 8)) for _ in range(4)]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.Adam(params, lr=1e-3, foreach=False)
    tracker = session.new_tracker(__file__)
    full = tracker.write_call
    started = tracker.steps.started
    times: dict[str, list] = {"plain": [], "off": [], "bare": [], "each": [], "full": []}
    _steps(opt, 20)
    for _ in range(rounds):
        times["plain"].append(_steps(opt, steps))
        with session.active(tracker):
            for mode in ("off", "bare", "each", "full"):
                tracker.active = mode != "off"
                tracker.write_call = _bare if mode == "bare" else full
                tracker.steps.started = started if mode == "full" else _no_step
                times[mode].append(_steps(opt, steps))
    writes = 6 * len(params)
    best = {mode: min(t) for mode, t in times.items()}
    print(f"{'mode':6s} {'us/step':>9s} {'over plain':>11s} {'us/write':>9s}")
    for mode, t in best.items():
        print(f"{mode:6s} {t:9.1f} {t - best['plain']:11.1f} {(t - best['plain']) / writes:9.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50, int(sys.argv[2]) if len(sys.argv) > 2 else 30)
