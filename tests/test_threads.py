"""A program that runs torch in several threads is recorded in all of them, for the whole run.

tensorscope's own work (the sinks' finite checks after each backward, a growth sample) pauses the
recorder in the thread that does it, and in that thread alone (NOTE [Pausing the recorder] in
tracker.py). A pause that switched the whole process off, saved and written back, once left the
recorder off for good when two threads' checks overlapped; a later thread's exception then showed a
wrapper's frame in the traceback the program printed (tests/programs/threads_dataloader.py, CI).

Expected facts come from the program itself: each thread counts the backward calls it makes, and
plain python's stdout and stderr are the reference for what the program prints.
"""

from __future__ import annotations

import textwrap

import pytest

from _cli import load_report, run_cli, run_python

THREADS, STEPS = 4, 300

PROGRAM = textwrap.dedent(f"""\
    import threading

    import torch

    calls = []


    def train(seed):
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(16, 16, generator=g, requires_grad=True)
        for _ in range({STEPS}):
            loss = (w * 2).sin().sum()
            loss.backward()
            calls.append(seed)


    def fails():
        s = torch.ones(3, requires_grad=True).sigmoid().sum()
        s.backward()
        s.backward()


    workers = [threading.Thread(target=train, args=(i,)) for i in range({THREADS})]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    print("backward calls", len(calls))
    t = threading.Thread(target=fails)
    t.start()
    t.join()
    a = torch.randn(3)
    b = a.view(3)
    b.mul_(2)
    print("main thread done")
    x = torch.randn(3, requires_grad=True)
    y = x.exp()
    y_view = y[:2]
    y_view.add_(1)
    y.sum().backward()
""")
BACKWARD_LINE = PROGRAM.splitlines().index("        loss.backward()") + 1
WRITE_LINE = PROGRAM.splitlines().index("b.mul_(2)") + 1
LINES = PROGRAM.splitlines()
SAVING_LINE, CULPRIT_LINE = LINES.index("y = x.exp()") + 1, LINES.index("y_view.add_(1)") + 1
BACKWARD_OF_MAIN = LINES.index("y.sum().backward()") + 1


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("threads")
    path = root / "threads.py"
    path.write_text(PROGRAM)
    plain = run_python(path, cwd=root, fresh=False)
    report = root / "r.json"
    code, out, err, _ = run_cli("run", "-o", str(report), str(path), cwd=root)
    explained = run_cli("explain", "--json", str(path), cwd=root)
    return plain, (code, out, err), load_report(report.read_text()), explained


def test_every_threads_calls_are_recorded_and_the_main_thread_after_them(runs):
    (rc_py, out_py, _), (rc, out, err), doc, _ = runs
    assert rc_py == 1 and f"backward calls {THREADS * STEPS}" in out_py, out_py
    assert (rc, out) == (rc_py, out_py), err[-2000:]
    counts = {(s["kind"], s["line"]): s["count"] for s in doc["events_summary"]["sites"]}
    # past the first per_site events at a line each is counted, not recorded; the count is of every call
    assert counts.get(("backward", BACKWARD_LINE)) == THREADS * STEPS, doc["events_summary"]
    writes = [e for e in doc["events"] if e["kind"] == "write" and e["line"] == WRITE_LINE]
    assert [w["op"] for w in writes] == ["mul_"], "the main thread's write after the threads went unrecorded"


def test_a_threads_traceback_is_plain_pythons(runs):
    (_, _, err_py), (_, _, err), _, _ = runs
    assert "Exception in thread" in err_py and "backward through the graph a second time" in err_py
    assert err == err_py


def test_the_failure_that_ended_the_program_is_diagnosed_after_a_threads_caught_one(runs):
    """A thread died of its backward error (caught by threading.excepthook); the main thread then died of
    a version error: that one is diagnosed, with its writer and its saving line (NOTE [The last failure,
    not the first] in instrument/recorder.py)."""
    (_, _, err_py), _, doc, (rc, _, err, explained) = runs
    assert "modified by an inplace operation" in err_py.strip().splitlines()[-1]
    for d in (doc["diagnosis"], explained["diagnosis"]):
        assert d["kind"] == "inplace-modified-saved-tensor", d
        assert (d["culprit"]["line"], d["culprit"]["alias"]) == (CULPRIT_LINE, "y_view"), d["culprit"]
    assert rc == 1, err[-2000:]
    assert explained["diagnosis"]["saved_by"]["line"] == SAVING_LINE
    assert explained["diagnosis"]["backward"]["line"] == BACKWARD_OF_MAIN
