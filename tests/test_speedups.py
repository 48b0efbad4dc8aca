"""The optional compiled accelerator (NOTE [The compiled lane] in tensorscope/instrument/speedups.py).

- the real CLI, both ways (the accelerator, and ``TENSORSCOPE_PURE_PYTHON=1``): the same reports (pointers and
  timings aside), exit statuses and output, and the output python prints, for a program whose gradients' own
  ``__torch_function__`` raises from inside a write of Adam's step after its writes took the step's lane, and for
  the version error of a step taken between two backward calls;
- in process: the compiled lane takes the step's writes and keeps nothing alive (refcounts of the parameters,
  the state tensors and torch's code, live tensors, over twenty more steps).

Skipped where the accelerator is not built (``python setup.py build_ext --inplace``).
"""

from __future__ import annotations

import gc
import json
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from _cli import REPO, run_many, run_python
from tensorscope import compact, compat
from tensorscope.instrument import session, speedups

pytestmark = pytest.mark.skipif(speedups.compiled() is None,
                                reason="the accelerator is not built (python setup.py build_ext --inplace)")

PROGRAMS = REPO / "tests" / "programs"
_PURE = {"env": {"TENSORSCOPE_PURE_PYTHON": "1"}}
_VOLATILE = ("ptr", "address", "seconds", "pid", "elapsed", "wall", "cpu_s")


def _norm(doc):
    if isinstance(doc, dict):
        return {k: _norm(v) for k, v in doc.items() if not any(w in k for w in _VOLATILE)}
    if isinstance(doc, list):
        return [_norm(v) for v in doc]
    return doc


def _report(path):
    with open(path) as f:
        return _norm(compact.expand(json.load(f)))


def test_reports_are_the_same_with_the_accelerator_and_without(tmp_path):
    raising = PROGRAMS / "speedups" / "lane_raises.py"
    between = PROGRAMS / "optimizer_steps" / "step_between_backwards.py"
    reports = {(p.stem, pure): tmp_path / f"{p.stem}_{pure}.json" for p in (raising, between) for pure in (0, 1)}
    jobs = [("python", raising)]
    for (stem, pure), rep in reports.items():
        prog = raising if stem == raising.stem else between
        jobs.append(("tensorscope", "run", "-o", rep, prog, _PURE) if pure else ("tensorscope", "run", "-o", rep, prog))
    results = run_many(jobs)
    (py_rc, py_out, py_err), runs = results[0], dict(zip(reports, results[1:]))
    assert py_rc == 0 and "30 ValueError refused in lerp_" in py_out, py_err[-2000:]
    for pure in (0, 1):  # python's output, both ways: no frame of tensorscope's in the traceback the program read
        rc, out, err = runs[(raising.stem, pure)][:3]
        assert (rc, out) == (py_rc, py_out), (pure, err[-2000:])
    for stem in (raising.stem, between.stem):
        fast, pure = runs[(stem, 0)], runs[(stem, 1)]
        assert fast[:2] == pure[:2], (stem, fast[2][-2000:], pure[2][-2000:])
        a, b = _report(reports[(stem, 0)]), _report(reports[(stem, 1)])
        assert a == b, stem
        writes = [s for s in a["events_summary"]["sites"] if s["kind"] == "write"]
        assert sum(s["count"] for s in writes) > 500, writes  # the steps' writes were recorded, and counted alike
    assert _report(reports[(between.stem, 0)])["diagnosis"]["kind"] == "inplace-modified-saved-tensor"


def test_compiled_lane_takes_the_steps_writes_and_keeps_nothing_alive():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=False)
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    code = sys.modules[type(opt).__module__]._single_tensor_adam.__code__  # torch.optim.adam

    def held():
        state = [v for p in model.parameters() for v in opt.state[p].values() if isinstance(v, torch.Tensor)]
        gc.collect()
        return ([sys.getrefcount(t) for t in list(model.parameters()) + state], sys.getrefcount(code),
                sum(issubclass(type(o), torch.Tensor) for o in gc.get_objects()))

    tracker = session.new_tracker(__file__)
    with session.active(tracker):
        lane = vars(torch.Tensor)["lerp_"].__call__  # the wrapper's body (NOTE [Transparent wrappers])
        assert isinstance(lane, speedups.compiled().LaneWrite)  # a CountedWrite is one (NOTE [A counted write, compiled])
        assert speedups.compiled().slots_known()[0].__name__ == "_Step"  # its slots read in place
        for i in range(60):
            if i == 40:  # each line's detailed events long used up, the log's entries at their cap
                before, hits = held(), lane.hits
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        after = held()
    assert tracker.steps.whole == 60
    assert lane.hits - hits == 20 * 4  # one exp_avg.lerp_ a parameter a step, each by the compiled lane
    # the refcounts exactly; the live tensors are the process's, so an earlier test's in the same worker may die
    # meanwhile (seen once under xdist: 320 -> 316): a tensor kept a step would make the count grow
    assert after[:2] == before[:2] and after[2] <= before[2], (before, after)


def test_hostile_callers_of_the_compiled_entry_points_crash_nothing():
    """review19: ``log_writes`` holds each write and reads the list's length at each turn (a storage key that empties
    the list read freed memory), and a step type's slots are read in place only when they are its own (a borrowed
    member descriptor's offset lay outside the object; ``int``'s NULL ``tp_dict`` on 3.12+ was read): the
    program's output is the pure-Python loop's and a read by name's."""
    rc, out, err = run_python(PROGRAMS / "speedups" / "hostile_callers.py")
    assert rc == 0, err[-2000:]
    assert out.splitlines() == ["log_writes: True 1"] + ["LaneWrite: None True"] * 3, out


def test_compiled_index_counts_and_log_are_the_python_ones():
    """``_speedups.step_index``, ``add_count`` and ``log_writes`` (at the log's cap) against the pure-Python
    functions they replace, on a real optimizer's state: the same dict in the same order, the same counts, the
    same write log (entries and storage order)."""
    from collections import OrderedDict
    from tensorscope.instrument import optimizer_steps as steps
    from tensorscope.instrument import recorder
    from tensorscope.instrument.records import MAX_WRITES_PER_STORAGE as cap

    c = speedups.compiled()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    opt = torch.optim.Adam(model[0].parameters(), lr=1e-2, foreach=False)
    F.mse_loss(model(torch.randn(5, 3)), torch.zeros(5, 2)).backward()
    opt.step()
    opt.add_param_group({"params": list(model[1].parameters())})  # no state yet, a gradient each
    model[0].bias.grad = None
    orphan = nn.Parameter(torch.zeros(2))  # a state under a parameter no group holds, with a non-tensor value
    opt.state[orphan] = {"step": 3, "exp_avg": torch.ones(2), "kept": nn.Parameter(torch.ones(1))}
    got = c.step_index(opt.param_groups, opt.state.values(), torch.Tensor)
    want = steps._index(opt)
    assert [(k, id(v)) for k, v in got.items()] == [(k, id(v)) for k, v in want.items()]
    assert len(want) == 4 + 3 + 2 * 3 + 2  # parameters, gradients, Adam's three states of two, the orphan's two

    counts_c, counts_py = {}, {}
    for key, n in (("a", 1), ("a", 5), ("b", 0), (("write", "f.py", 3), 2)):
        c.add_count(counts_c, key, n)
        recorder.add_count(counts_py, key, n)
    assert counts_c == counts_py == {"a": 6, ("write", "f.py", 3): 2}

    params = list(model.parameters())
    code = test_compiled_index_counts_and_log_are_the_python_ones.__code__
    writes = [(p, "add_", code, v, v + 1) for v in range(cap + 3) for p in params[:2]]  # past the cap, alternating
    writes += [(params[2], "mul_", code, 7, 8)] * 2 + [(weakref_to_dead(), "add_", code, 0, 1)]
    logs = []
    for fill in (c.log_writes, None):
        log = OrderedDict()
        for _ in range(2):  # the second call finds every storage's entries at the cap
            if fill is not None:
                fill(list(writes), log, recorder.storage_key, steps._state_ids, opt, (5, True, code, 12, 3),
                     4096, cap)
            else:
                steps._log_writes(list(writes), log, opt, 5, True, code, 12, 3)
        logs.append(log)
    assert list(logs[0].items()) == list(logs[1].items())
    assert [len(v) for v in logs[0].values()] == [cap, cap, 4]


def weakref_to_dead():
    import weakref
    return weakref.ref(torch.zeros(1))  # a temporary of the step's, dead by the log
    assert after == before


def test_counted_calls_both_ways_as_python(tmp_path):
    """The compiled body of a counted line's calls (NOTE [A counted line's calls, compiled] in speedups.py): the
    program's output is python's both ways (a view failing at a counted line reaches the program with only its own
    frame), the reports are the same, and what they say torch confirms: the row kept on the 70th pass changed (the
    program prints its sum after the write: 8.0, not 0.0), the failed view is the run's failure at its line, and
    each line of the loop counted the 80 calls it made (79 views at the line whose 61st failed)."""
    prog = PROGRAMS / "speedups" / "counted_calls.py"
    reports = {pure: tmp_path / f"counted_{pure}.json" for pure in (0, 1)}
    results = run_many([("python", prog), ("tensorscope", "run", "-o", reports[0], prog),
                        ("tensorscope", "run", "-o", reports[1], prog, _PURE)])
    py_rc, py_out, py_err = results[0]
    assert py_rc == 0 and "60 RuntimeError [('counted_calls.py', '<module>')]" in py_out, py_err[-2000:]
    assert py_out.splitlines()[-1] == "3276.0 8.0 torch.float64", py_out
    for pure in (0, 1):
        rc, out, err = results[1 + pure][:3]
        assert (rc, out) == (py_rc, py_out), (pure, err[-2000:])
    a, b = _report(reports[0]), _report(reports[1])
    assert a == b
    lines = prog.read_text().splitlines()
    at = {text.strip(): i for i, text in enumerate(lines, 1)}
    counts = {(s["kind"], s["line"]): s["count"] for s in a["events_summary"]["sites"]}
    assert counts == {("create", at["a = torch.full((8,), float(i % 7))"]): 80, ("copy", at["b = a.clone()"]): 80,
                      ("write", at["b.mul_(2)"]): 80, ("alias", at["total += float(b[1:].sum())"]): 80,
                      ("create", at[next(t.strip() for t in lines if "c = torch.zeros" in t)]): 80,
                      ("alias", at["row = weight[0]"]): 80, ("alias", at["flat = c.view(2, 4)"]): 79}, counts
    failure = a["recording"]["failure"]
    assert (failure["where"], failure["op"], failure["line"]) == ("alias", "view", at["flat = c.view(2, 4)"])
    kept = [h for h in a["hazards"] if h["kind"] == "kept-value-changed"]
    assert [(h["kept_at"]["line"], h["culprit"]["line"]) for h in kept] == [(at["row = weight[0]"],
                                                                               at["weight.add_(1)"])], a["hazards"]


def test_counted_calls_compiled_count_in_place_and_keep_nothing_alive():
    """In process: past each line's first events the compiled body counts the calls itself (its ``hits``), the
    counts are the calls made, and no tensor of the loop outlives it (weak references to each one dead)."""
    import weakref

    tracker = session.new_tracker(__file__)
    tracker.growth.enabled = False
    refs = []
    with session.active(tracker):
        body = vars(torch.Tensor)["clone"].__call__  # the wrapper's body (NOTE [Transparent wrappers])
        assert type(body).__name__ == "CountedCall"
        hits = body.hits
        for i in range(60):
            a = torch.full((4,), float(i))
            b = a.clone()  # the line of the counts below
            v = b[1:]
            refs += [weakref.ref(a), weakref.ref(b), weakref.ref(v)]
        line = sys._getframe().f_lineno - 3
        del a, b, v
        gc.collect()
    # the calls past the line's first events, less the first of them (counted by the Python body, which remembers it)
    assert body.hits - hits == 60 - tracker.per_site - 1
    assert tracker.site_counts[("copy", __file__, line)] == 60
    assert all(r() is None for r in refs)


def test_counted_writes_both_ways_as_python(tmp_path):
    """The compiled counted write (NOTE [A counted write, compiled] in speedups.py), from its hostile callers (a
    subclass, ``.data``, ``no_grad``, ``out=``, an in-place dunder, an index write, ``copy_``, a dead young view, a
    kept alias, a write that fails, a torch-function mode, a thread): the program's output is python's both ways
    (the failing write reaches the program with only its own frame), the ``run`` and ``explain`` reports are the
    same both ways, each write line counted the 80 calls the loop made there, and the row kept on the 70th pass,
    which torch says changed (python prints its sum, 640.0, not 0.0), is the hazard ``run`` names, with its
    culprit's line."""
    prog = PROGRAMS / "speedups" / "counted_writes.py"
    reports = {(cmd, pure): tmp_path / f"{cmd}_{pure}.json" for cmd in ("run", "explain") for pure in (0, 1)}
    jobs = [("python", prog)] + [("tensorscope", cmd, "-o", rep, prog) + ((_PURE,) if pure else ())
                                 for (cmd, pure), rep in reports.items()]
    results = run_many(jobs)
    py_rc, py_out, py_err = results[0]
    assert py_rc == 0 and "60 RuntimeError [('counted_writes.py', '<module>')]" in py_out, py_err[-2000:]
    assert py_out.splitlines()[-1].split()[1] == "640.0", py_out
    runs = dict(zip(reports, results[1:]))
    for pure in (0, 1):
        rc, out, err = runs[("run", pure)][:3]
        assert (rc, out) == (py_rc, py_out), (pure, err[-2000:])
    for cmd in ("run", "explain"):
        assert runs[(cmd, 0)][:2] == runs[(cmd, 1)][:2], (cmd, runs[(cmd, 0)][2][-2000:], runs[(cmd, 1)][2][-2000:])
        assert _report(reports[(cmd, 0)]) == _report(reports[(cmd, 1)]), cmd
    a = _report(reports[("run", 0)])
    lines = prog.read_text().splitlines()
    at = {text.strip(): i for i, text in enumerate(lines, 1)}
    counts = {s["line"]: s["count"] for s in a["events_summary"]["sites"] if s["kind"] == "write"}
    for text in ("b.mul_(2)", "plain.add_(1)", "param.data.mul_(0.5)", "param.add_(1)", "b += 1", "b[0] = 3.0",
                 "out.copy_(b)", "b.sub_(1)", "weight.add_(1)", "b.add_(torch.ones(7 if i == 60 else 8))",
                 "t.mul_(1.0)"):
        assert counts.get(at[text]) == 80, (text, counts)
    kept = [h for h in a["hazards"] if h["kind"] == "kept-value-changed"]
    assert [(h["kept_at"]["line"], h["culprit"]["line"]) for h in kept] == [(at["row = weight[0]"],
                                                                               at["weight.add_(1)"])], a["hazards"]


def test_counted_writes_compiled_count_and_log_as_the_python_body(monkeypatch):
    """In process, one loop both ways (the accelerator's body, then the Python one: ``TENSORSCOPE_PURE_PYTHON`` is
    read when the wrappers are made), from the main thread and a thread: the compiled body counts the writes past
    each line's first events itself (its ``counted``), the counts are the calls made, the write log's entries are
    the Python body's, and no tensor of the loop outlives it."""
    import threading
    import weakref

    def loop(n, t, out, refs):
        for i in range(n):
            t.mul_(1.0)  # <- the line counted below
            with torch.no_grad():
                t.add_(0)
            c = t.clone()
            c.add_(1)
            out.copy_(c)
            refs.append(weakref.ref(c))

    def once():
        tracker = session.new_tracker(__file__)
        tracker.growth.enabled = False
        t, out, refs = torch.ones(4), torch.zeros(4), []
        with session.active(tracker):
            body = vars(torch.Tensor)["mul_"].__call__
            counted = getattr(body, "counted", None)
            loop(60, t, out, refs)
            worker = threading.Thread(target=loop, args=(60, t, out, refs))
            worker.start()
            worker.join()
            counted = None if counted is None else body.counted - counted
        gc.collect()
        # the last 16 writes of each of the loop's two long-lived tensors (a clone's storage is soon another's)
        log = [[(e[0], e[2] - e[1]) + tuple(e[3:]) for e in tracker.write_log[compat.storage_key(x)]] for x in (t, out)]
        sites = {k: v for k, v in tracker.site_counts.items() if k[0] == "write"}
        return type(body).__name__, counted, sites, log, all(r() is None for r in refs), tracker.per_site

    fast = once()
    monkeypatch.setenv("TENSORSCOPE_PURE_PYTHON", "1")
    pure = once()
    line = next(i for i, text in enumerate(open(__file__).read().splitlines(), 1)
                if text.endswith("<- the line counted below"))
    assert fast[0] == "CountedWrite" and pure[0] == "function"
    assert fast[1] == 120 - fast[5]  # the main thread's and the thread's writes past the line's first events
    assert ("write", __file__, line) in fast[2] and list(fast[2].values()) == [120] * 4  # the loop's four write lines
    assert fast[2:] == pure[2:]
    assert fast[4]


TEMPORARY_DIES = """import weakref

import torch

refs = []


def make():
    t = torch.full((4, 3), 1.0)
    refs.append(weakref.ref(t))
    return t


try:
    make().to("cuda" if not torch.cuda.is_available() else "no-such-device")
except (AssertionError, RuntimeError) as e:
    err = e  # kept, as a logger would
print("temporary freed:", refs[0]() is None)
make().to("cuda" if not torch.cuda.is_available() else "no-such-device")
"""


def test_a_failed_calls_receiver_dies_both_ways_as_under_python(tmp_path):
    """NOTE [A wrapper's frame behind a library's traceback entry] (runner.py): a CPU-only torch raises inside
    `torch.cuda._lazy_init`, whose frame's `f_back` was the pure-Python wrapper's, with the receiver in its
    arguments. python: the temporary is freed though the program keeps the exception; on main the pure-Python
    path printed "False", and the report of the exception that ended the program said `alive` for the second
    temporary where the accelerator said not (tests/corpus/device_cuda_input_cpu_model.py)."""
    prog = tmp_path / "temporary_dies.py"
    prog.write_text(TEMPORARY_DIES)
    reps = [str(tmp_path / "c.json"), str(tmp_path / "p.json")]
    (prc, pout, perr), (crc, cout, cerr, _), (yrc, yout, yerr, _) = run_many(
        [("python", str(prog)), ("tensorscope", "run", "-o", reps[0], str(prog)),
         ("tensorscope", "run", "-o", reps[1], str(prog), _PURE)])
    assert prc == 1 and pout == "temporary freed: True\n", (pout, perr)
    assert (crc, cout) == (yrc, yout) == (prc, pout), (cerr, yerr)
    alive = [{t["id"]: t["alive"] for t in compact.expand(json.loads(open(r).read()))["tensors"]} for r in reps]
    assert alive[0] == alive[1] and not any(alive[0].values()), alive
