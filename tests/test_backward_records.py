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
    # a subclass's root goes to both: torch.autograd.grad (and autograd.backward, on releases that hand it over) of
    # one is handed to its __torch_function__, which calls the function again; one record a call (NOTE [A backward
    # call handed to __torch_function__ is recorded once] in patches.py)
    return i % 2 == 1


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


HANDED = Path(__file__).parent / "programs" / "backward_handed.py"


def test_a_call_handed_to_torch_function_is_recorded_once_at_the_programs_line(tmp_path):
    """NOTE [A backward call handed to __torch_function__ is recorded once] (patches.py): a subclass's root and a
    torch-function mode of the program's that passes calls on (NOTE [Tensor.backward handed to __torch_function__]
    for a loss's ``backward()`` there); each backward call of the program's is one record, at its own line (not the mode's ``__torch_function__`` line), in order; stdout and stderr are python's; with a
    saved tensor written in place before the last call, the version error is diagnosed with that call's line as
    the backward line."""
    import json

    from _cli import run_many
    from tensorscope import compact

    lines = [i for i, text in enumerate(HANDED.read_text().splitlines(), 1) if text.endswith("# <- call")]
    out = tmp_path / "r.json"
    (py, ts, bad_py, bad) = run_many([("python", HANDED), ("tensorscope", "run", "-o", out, HANDED),
                                      ("python", HANDED, "bad"), ("tensorscope", "explain", "--json", HANDED, "bad")])
    assert ts[:3] == py[:3] and py[0] == 0, (ts, py)
    with open(out) as f:
        doc = compact.expand(json.load(f))
    assert [e["line"] for e in doc["events"] if e.get("kind") == "backward"] == lines
    assert bad_py[0] == 1 and bad[0] == 1 and bad[1].startswith("{"), bad[2][-2000:]
    diagnosis = json.loads(bad[1])["diagnosis"]
    assert diagnosis["kind"] == "inplace-modified-saved-tensor", diagnosis
    assert diagnosis["backward"]["line"] == lines[-1], diagnosis["backward"]
