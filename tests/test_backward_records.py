"""Each backward call's record (``BackwardCalls.before``/``after``: the report's ``backwards``, what backward-twice
reads) past its line's detailed events, read on the short path of NOTE [A backward call's facts, read cheaply]:
in process, every record's place, options and roots' facts are what torch says of the roots at the call, the
line's count is the number of calls the loop made, and a thread's calls are counted and recorded as the main
thread's.
"""

from __future__ import annotations

import threading
from pathlib import Path

import torch

from tensorscope.instrument import session

_LINES = Path(__file__).read_text().splitlines()


def _line(marker: str) -> int:
    return next(i for i, text in enumerate(_LINES, 1) if text.endswith(f"# <- {marker}"))


class _Mine(torch.Tensor):
    """The program's own subclass (no ``__torch_function__`` of its own): inspected, read by attribute."""


def _facts(t):
    return {"requires_grad": t.requires_grad, "grad_fn": type(t.grad_fn).__name__ if t.grad_fn is not None else None,
            "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "is_leaf": t.is_leaf}


def _backward(i):
    # a subclass's root goes to backward(): torch.autograd.grad of one is handed to its __torch_function__, which
    # calls torch.autograd.grad again (two records, on main as here)
    return i % 2 == 1 or i % 3 == 2


def _loop(n, w, seen):
    for i in range(n):
        if i % 3 == 0:
            root = (w * float(i)).sum()
        elif i % 3 == 1:
            root = (w.double() ** 2).mean()
        else:
            root = torch.ones(2, requires_grad=True).as_subclass(_Mine).sum()
        seen.append(_facts(root))
        if _backward(i):
            root.backward(None, True)  # <- backward
        else:
            torch.autograd.grad([root], [w], None, False, allow_unused=True)  # <- grad


def test_records_past_the_cap_are_torchs_facts():
    n = 90
    w = torch.randn(3, requires_grad=True)
    seen: list = []
    threaded: list = []
    tracker = session.new_tracker(__file__)
    tracker.growth.enabled = False
    with session.active(tracker):
        _loop(n, w, seen)
        t = threading.Thread(target=_loop, args=(n, w, threaded))
        t.start()
        t.join()
    records = [b for b in tracker.backward_calls.backwards if b["file"] == __file__]
    assert len(records) == 2 * n
    main, other = records[:n], records[n:]
    for recs, facts in ((main, seen), (other, threaded)):
        for i, (b, f) in enumerate(zip(recs, facts)):
            backward = _backward(i)
            assert b["op"] == ("backward" if backward else "grad")
            assert b["line"] == _line("backward" if backward else "grad")
            assert b["retain_graph"] is backward and b["ok"] is True
            assert len(b["roots"]) == 1
            got = {k: b["roots"][0][k] for k in f}
            assert got == f, (i, got, f)
    counts = {(kind, line): c for (kind, file, line), c in tracker.site_counts.items() if file == __file__}
    calls = sum(_backward(i) for i in range(n))
    assert counts[("backward", _line("backward"))] == 2 * calls  # both threads
    assert counts[("backward", _line("grad"))] == 2 * (n - calls)
    assert calls > tracker.per_site and n - calls > tracker.per_site  # past the lines' detailed events
