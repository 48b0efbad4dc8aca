"""A line's calls past its first events are counted on a short path (NOTE [A counted line's calls] in
instrument/calls.py): in process, the counts per line are the numbers of calls the program made there
(known from the program's loops), and what a later answer reads of a counted alias, the kept value it
may be, is still seen: torch confirms the kept row changed, and the recorder saw that write.
"""

from __future__ import annotations

import threading
from pathlib import Path

import torch

from tensorscope.instrument import session

_LINES = Path(__file__).read_text().splitlines()


def _line(marker: str) -> int:
    return next(i for i, text in enumerate(_LINES, 1) if text.endswith(f"# <- {marker}"))


class _Own(torch.Tensor):
    """A subclass with its own __torch_function__: tensorscope does not inspect it (recorder.inspectable)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def _loop(n, weight, kept, own):
    for i in range(n):
        a = torch.full((4,), float(i))  # <- create
        b = a.clone()  # <- clone
        head = b[1:]  # <- slice
        parts = b.split(2)  # <- split
        x = own if i % 3 == 0 else b
        flat = x.view(2, 2)  # <- mixed
        row = weight[0]  # <- row
        if i == n - 5:
            kept.append(row)
        del a, head, parts, flat, row


def test_counts_per_line_and_a_counted_alias_still_kept():
    n = 90
    weight = torch.zeros(3, 4)
    own = torch.zeros(4).as_subclass(_Own)
    kept: list = []
    tracker = session.new_tracker(__file__)
    tracker.growth.enabled = False
    with session.active(tracker):
        _loop(n, weight, kept, own)
        threads = [threading.Thread(target=_loop, args=(n, weight, [], own)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        before = kept[0].clone()
        weight.add_(1)  # <- write
    runs = 4  # the main thread's loop and three threads', each n iterations
    counts = {(kind, line): c for (kind, file, line), c in tracker.site_counts.items() if file == __file__}
    plain = sum(1 for i in range(n) if i % 3 != 0)  # `x.view` of the subclass is not inspected, so not counted
    expected = {("create", _line("create")): runs * n, ("copy", _line("clone")): runs * n,
                ("alias", _line("slice")): runs * n, ("alias", _line("split")): runs * n,
                ("alias", _line("mixed")): runs * plain, ("alias", _line("row")): runs * n}
    assert {k: counts.get(k) for k in expected} == expected, counts
    per_site = tracker.per_site
    assert tracker.aggregated >= sum(c - per_site for c in expected.values())
    # every event past its line's cap is counted once in ``aggregated`` too, from all four threads (the event
    # log is far from full here): NOTE [Site counts from several threads]
    assert len(tracker.events) < tracker.max_events
    assert tracker.aggregated == sum(max(0, c - per_site) for c in tracker.site_counts.values())
    # the row kept past its line's cap: torch says the write changed it, and the recorder saw that write
    assert not torch.equal(before, kept[0])
    entries = [e for es in tracker.kept.keys.values() for e in es if e.ref() is kept[0]]
    assert entries and entries[0].writes >= 1 and entries[0].line == _line("row")
    assert entries[0].write["line"] == _line("write")


def test_many_counts_added_at_once_lose_none_to_other_threads():
    """``add_count`` (an optimizer step's writes counted at once) reads, adds and writes a site's count in one C
    call, as ``count_site`` counts one (NOTE [Site counts from several threads]): with a thread switch asked for
    every microsecond, two threads adding 3 and two counting 1 through one key lose nothing."""
    import sys

    from tensorscope.instrument.recorder import add_count, count_site

    counts: dict = {}
    n = 20_000

    def add():
        key = ("write", "train.py", 7)  # an equal key, another object, as each call site makes its own
        for _ in range(n):
            add_count(counts, key, 3)

    def one():
        key = ("write", "train.py", 7)
        for _ in range(n):
            count_site(counts, (key,))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=f) for f in (add, one, add, one)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert counts == {("write", "train.py", 7): 2 * n * 3 + 2 * n}
    add_count(counts, ("write", "train.py", 8), 0)  # nothing counted: no key made, as count_site of nothing
    assert ("write", "train.py", 8) not in counts
