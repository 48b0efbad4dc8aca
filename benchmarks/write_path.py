"""The in-place write's hot path, in-process: N ``x.add_(1)`` through the real wrappers.

Usage::

    python benchmarks/write_path.py [N] [ROUNDS]

Prints, per round, microseconds per write without tensorscope and under its instrumentation
(``tensorscope run``'s wrappers, no saved-tensor hooks), and the difference: what one recorded
in-place write costs. The loop is this file's own code, so every write finds the program's line
(the first 20 in detail, the rest counted and logged). Report the minimum over the rounds:
other load on the machine only ever adds time.
"""

from __future__ import annotations

import sys
import time

import torch

from tensorscope.instrument import session


def _loop(x, n):
    start = time.process_time()
    for _ in range(n):
        x.add_(1)
    return (time.process_time() - start) / n * 1e6


def main(n: int, rounds: int) -> None:
    torch.set_num_threads(1)
    x = torch.zeros(4)
    plain, under = [], []
    for _ in range(rounds):
        plain.append(_loop(x, n))
        tracker = session.new_tracker(__file__)
        with session.active(tracker):
            under.append(_loop(x, n))
    best_plain, best_under = min(plain), min(under)
    print(f"plain       {best_plain:6.2f} us/write (min of {rounds})")
    print(f"tensorscope {best_under:6.2f} us/write (min of {rounds})")
    print(f"cost        {best_under - best_plain:6.2f} us/write")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000, int(sys.argv[2]) if len(sys.argv) > 2 else 5)
