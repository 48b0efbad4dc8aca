"""A program that runs torch in several threads is recorded in all of them, for the whole run.

tensorscope's own work (the sinks' finite checks after each backward, a growth sample) pauses the
recorder in the thread that does it, and in that thread alone (NOTE [Pausing the recorder] in
tracker.py). A pause that switched the whole process off, saved and written back, once left the
recorder off for good when two threads' checks overlapped; a later thread's exception then showed a
wrapper's frame in the traceback the program printed (tests/programs/threads_dataloader.py, CI).

The leaves a backward line's graph reached are cached per line and thread, and used only for the graph
they came from (NOTE [Leaves cached per backward line and thread] in instrument/failure_graph.py).

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


# Four threads, each training its own weights from one `loss.backward()` line; one thread divides by zero once.
NAN_THREADS = textwrap.dedent("""\
    import threading

    import torch


    def train(seed, out):
        torch.manual_seed(seed)
        w = torch.randn(8, 8, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.01)
        for step in range(60):
            x = torch.randn(4, 8)
            scale = torch.tensor(0.0) if (seed == 2 and step == 50) else torch.tensor(1.0)
            loss = (x @ w / scale).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        out[seed] = bool(torch.isfinite(w).all())


    out = {}
    workers = [threading.Thread(target=train, args=(i, out)) for i in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    print(sorted(out.items()))
""")


def test_threads_that_train_their_own_weights_from_one_line(tmp_path):
    """Each thread's gradients are read by that thread only, after its own backward: one table entry per line
    made threads read each other's `.grad` while the other's backward wrote it, and `explain` died of a
    segmentation fault (NOTE [Leaves cached per backward line and thread] in instrument/failure_graph.py)."""
    path = tmp_path / "nan_threads.py"
    path.write_text(NAN_THREADS)
    rc_py, out_py, err_py = run_python(path, cwd=tmp_path, fresh=False)
    assert rc_py == 0 and out_py == "[(0, True), (1, True), (2, False), (3, True)]\n", (out_py, err_py)
    loss_line = NAN_THREADS.splitlines().index("        loss.backward()") + 1
    for command in ("explain", "run"):
        rc, out, err, doc = run_cli(command, "--json", str(path), cwd=tmp_path)
        assert rc in (0, 1) and doc is not None, (command, rc, err[-3000:])
        assert [h["kind"] for h in doc["hazards"]] == ["silent-non-finite-value"], doc["hazards"]
        # the first Inf is made in a worker thread, whose ops have no recorded line: the sink is the place named
        assert doc["hazards"][0]["culprit"]["line"] == loss_line, doc["hazards"]
        assert doc["hazards"][0]["nonfinite"]["sink"]["what"] == "loss"


# One backward line, two models: a helper that trains each in turn; the second's gradients go NaN (a masked sqrt).
TWO_MODELS = textwrap.dedent("""\
    import torch


    def step(model, opt, x, head):
        loss = head(model(x)).sum()
        opt.zero_grad()
        loss.backward()
        finite = all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
        opt.step()
        return finite


    def plain(z):
        return z.pow(2)


    def masked_sqrt(z):
        return torch.where(z > 0, z.sqrt(), torch.zeros_like(z))


    torch.manual_seed(0)
    a, b = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
    opt_b = torch.optim.SGD(b.parameters(), lr=0.1)
    x = torch.randn(8, 4)
    for i in range(3):
        print(step(a, opt_a, x, plain), step(b, opt_b, x, masked_sqrt))
""")


def test_one_backward_line_that_runs_two_graphs_checks_each_ones_gradients(tmp_path):
    """The leaves cached for a backward line are used only for the graph they came from (NOTE [Leaves cached per
    backward line and thread]): b's NaN gradients, made by its first backward (the line's second call), are the
    sink, not the parameters its step then made NaN."""
    path = tmp_path / "two_models.py"
    path.write_text(TWO_MODELS)
    rc_py, out_py, _ = run_python(path, cwd=tmp_path, fresh=False)
    assert rc_py == 0 and out_py.splitlines()[0] == "True False", out_py  # torch: b's first backward gave NaN
    lines = TWO_MODELS.splitlines()
    backward_line = lines.index("    loss.backward()") + 1
    sqrt_line = lines.index("    return torch.where(z > 0, z.sqrt(), torch.zeros_like(z))") + 1
    for command in ("run", "explain"):
        rc, out, err, doc = run_cli(command, "--json", str(path), cwd=tmp_path)
        assert doc is not None, (command, rc, err[-2000:])
        (hazard,) = doc["hazards"]
        sink = hazard["nonfinite"]["sink"]
        assert (sink["what"], sink["line"], sink["step"]) == ("grad", backward_line, 1), (command, sink)
        if command == "explain":
            assert hazard["culprit"]["line"] == sqrt_line, hazard["culprit"]


POOL = textwrap.dedent("""\
    from concurrent.futures import ThreadPoolExecutor

    import torch

    w = torch.randn(4, 3, requires_grad=True)


    def per_sample_grad(x):
        h = torch.tanh(x @ w)
        h.add_(1)
        (g,) = torch.autograd.grad(h.pow(2).sum(), w)
        return g


    with ThreadPoolExecutor(max_workers=2) as pool:
        grads = [f.result() for f in [pool.submit(per_sample_grad, torch.randn(4)) for _ in range(4)]]
""")


def test_a_workers_failure_raised_by_future_result_is_diagnosed_under_explain(tmp_path):
    """A version error in a pool's worker thread, raised again in the main thread by `Future.result()`: the
    diagnosis names the write; explain's saved-tensor hooks act on the main thread only, so the saving line
    is not known, and the report must not send the user to `tensorscope explain`, which they ran."""
    path = tmp_path / "pool.py"
    path.write_text(POOL)
    lines = POOL.splitlines()
    rc_py, _, err_py = run_python(path, cwd=tmp_path, fresh=False)
    assert rc_py == 1 and "which is output 0 of Tanh" in err_py.strip().splitlines()[-1], err_py
    rc, _, err, doc = run_cli("explain", "--json", str(path), cwd=tmp_path)
    assert rc == 1 and doc is not None, err[-2000:]
    d = doc["diagnosis"]
    assert d["kind"] == "inplace-modified-saved-tensor", d
    assert (d["culprit"]["line"], d["culprit"]["alias"]) == (lines.index("    h.add_(1)") + 1, "h"), d["culprit"]
    assert d["backward"]["line"] == lines.index("    (g,) = torch.autograd.grad(h.pow(2).sum(), w)") + 1
    assert "`tensorscope explain` names it" not in d["explanation"], d["explanation"]
    assert "main thread only" in d["explanation"], d["explanation"]


# A worker thread's loss goes NaN: a blank row gives p = 0/0, computed without autograd, then log(p) @ w, negated.
NEG_OF_NAN = textwrap.dedent("""\
    import threading

    import torch


    def train():
        torch.manual_seed(0)
        w = torch.randn(3, 1, requires_grad=True)
        x = torch.rand(8, 3)
        x[0] = 0.0
        p = x / x.sum(dim=1, keepdim=True)
        loss = -(torch.log(p) @ w.abs()).mean()
        loss.backward()
        print(torch.isnan(loss).item(), torch.isfinite(w.grad).all().item())


    t = threading.Thread(target=train)
    t.start()
    t.join()
""")


def test_a_threads_nan_is_not_blamed_on_an_op_that_cannot_make_one(tmp_path):
    """In a thread explain's saved-tensor hooks do not act, so no saved tensor tells which node made the NaN. The
    loss's own node (`neg`) cannot make one from finite inputs: it was named as the origin. Truth from torch: the
    loss is NaN and the NaN came before `neg` (the 0/0 division: tests/corpus_nonfinite/measure.py names it when `train()`
    runs in the main thread)."""
    path = tmp_path / "neg_of_nan.py"
    path.write_text(NEG_OF_NAN)
    rc_py, out_py, _ = run_python(path, cwd=tmp_path, fresh=False)
    assert (rc_py, out_py) == (0, "True False\n"), out_py
    rc, out, err, doc = run_cli("explain", "--json", str(path), cwd=tmp_path)
    assert doc is not None, err[-2000:]
    (h,) = doc["hazards"]
    assert h["kind"] == "silent-non-finite-value" and h["nonfinite"]["sink"]["what"] == "loss", h
    assert h["nonfinite"]["aten"] != "aten.neg" and "aten.neg" not in h["explanation"], h["explanation"]
    assert h["culprit"]["line"] == NEG_OF_NAN.splitlines().index("    loss.backward()") + 1, h["culprit"]
