"""The Python API, run for real in this process: tensorscope.inspect() as a block and a decorator.

Expected values come from torch (the same code run without inspect()); the report is checked
against the JSON schema and against the lines of this file.
"""

from __future__ import annotations

import gc
import json
import threading
import traceback
import weakref
from pathlib import Path

import pytest
import torch

import tensorscope
from tensorscope import compat
from tensorscope.compact import expand

from _cli import run_cli, validate_against_schema

HERE = Path(__file__).resolve()
SOURCE = HERE.read_text().splitlines()


def line_of(fragment: str) -> int:
    """The line of this file that holds `fragment` (exactly one)."""
    hits = [i + 1 for i, text in enumerate(SOURCE) if fragment in text and "line_of(" not in text]
    assert len(hits) == 1, (fragment, hits)
    return hits[0]


def formatted(exc: BaseException) -> list[str]:
    """``traceback.format_exception`` less the test function's own frame (it differs by design)."""
    return [part for part in traceback.format_exception(exc) if ", in test_" not in part]


def nothing_installed() -> bool:
    """No wrapper left on torch.Tensor and no default saved-tensor hook after a block."""
    return (torch.Tensor.mul_ is torch._C.TensorBase.mul_ and not hasattr(torch.Tensor.add_, "__wrapped__")
            and compat.top_pack_hook() is None)


# --- code run with and without inspect() ----------------------------------------------------

def stale_save():
    """backward() through a sigmoid output written in place through a detach() alias."""
    x = torch.ones(3, requires_grad=True)
    z = (x * 2).sigmoid()
    tmp = z.detach()
    tmp.mul_(2)  # the culprit
    z.sum().backward()  # raises


def training_step(seed: int):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(inplace=True), torch.nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.randn(5, 4)
    view = data[1:3]
    view.mul_(0.5)  # a write through a view
    loss = model(data).pow(2).mean()
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    opt.step()
    return loss.detach(), grads, [p.detach().clone() for p in model.parameters()], data


def call_plain(fn):
    return fn()


def call_inspected(fn):
    with tensorscope.inspect():
        return fn()


# --- the report -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def failed():
    """One failing block shared by the report tests: (report, exception).

    explain=True, as `tensorscope explain`: the saved-tensor hooks name the line that saved it.
    """
    with pytest.raises(RuntimeError) as info:
        with tensorscope.inspect(explain=True) as rep:
            stale_save()
    return rep, info.value


def test_a_failure_is_diagnosed_with_the_lines_of_the_code(failed):
    rep, exc = failed
    d = rep.diagnosis
    assert d["kind"] == "inplace-modified-saved-tensor"
    assert d["culprit"]["line"] == line_of("tmp.mul_(2)  # the culprit")
    assert d["culprit"]["alias"] == "tmp"
    assert d["saved_by"]["line"] == line_of("z = (x * 2).sigmoid()")
    assert d["backward"]["line"] == line_of("z.sum().backward()  # raises")
    assert Path(d["culprit"]["file"]).name == HERE.name
    assert rep.doc["program"]["exception"]["message"] == str(exc)


def test_the_parts_are_the_json_document(failed):
    rep, _ = failed
    written = json.loads(rep.to_json())
    assert written["form"] == "compact" and validate_against_schema(written)
    assert json.loads(rep.to_json(full=True)) == json.loads(json.dumps(rep.doc))
    doc = expand(written)  # the compact form holds the same facts
    assert validate_against_schema(doc)
    assert doc == json.loads(json.dumps(rep.doc))
    assert (doc["diagnosis"], doc["hazards"], doc["tensors"], doc["storages"], doc["events"]) == (
        rep.diagnosis, rep.hazards, rep.tensors, rep.storages, rep.events)
    names = {n for t in rep.tensors for n in t["names"]}
    assert {"stale_save.z", "stale_save.tmp"} <= names  # locals of the failing function, as in `run`
    text = rep.render()
    assert "Diagnosis: inplace-modified-saved-tensor" in text and "Timeline" in text
    assert "Timeline" not in rep.render(full=False)
    html = rep._repr_html_()
    assert "inplace-modified-saved-tensor" in html
    assert html.startswith('<div class="tensorscope">') and "<html" not in html  # a fragment a notebook embeds
    assert "diagnosis inplace-modified-saved-tensor" in repr(rep)


def test_a_report_is_ready_only_when_the_block_exits():
    with tensorscope.inspect() as rep:
        with pytest.raises(RuntimeError, match="when the inspect\\(\\) block exits"):
            rep.tensors
    assert rep.diagnosis is None and rep.hazards == []


def test_names_of_the_callers_locals_and_module_globals():
    a = torch.zeros(4)
    with tensorscope.inspect() as rep:
        b = a[1:3]
        b.add_(1)
        c = GLOBAL_TENSOR.t()
    by_name = {n: t for t in rep.tensors for n in t["names"]}
    assert by_name["b"]["view_of"] == by_name["a"]["id"]
    assert by_name["b"]["storage"] == by_name["a"]["storage"]
    assert by_name["c"]["view_of"] == by_name["GLOBAL_TENSOR"]["id"]
    assert by_name["a"]["version"] == a._version == 1
    write = [e for e in rep.events if e["kind"] == "write"]
    assert [(e["line"], e["alias"]) for e in write] == [(line_of("b.add_(1)"), "b")]
    del c


GLOBAL_TENSOR = torch.ones(2, 3)


# --- transparency -------------------------------------------------------------------------------

def test_outputs_and_gradients_are_those_of_the_code_without_inspect():
    plain = training_step(0)
    with tensorscope.inspect() as rep:
        inspected = training_step(0)
    for a, b in zip(plain[:1] + tuple(plain[1]) + tuple(plain[2]) + plain[3:],
                    inspected[:1] + tuple(inspected[1]) + tuple(inspected[2]) + inspected[3:]):
        assert torch.equal(a, b)
    assert any(e["kind"] == "write" for e in rep.events)
    assert nothing_installed()


def test_an_exception_leaves_the_block_unchanged():
    with pytest.raises(RuntimeError) as plain:
        call_plain(stale_save)
    with pytest.raises(RuntimeError) as inspected:
        call_inspected(stale_save)
    a, b = formatted(plain.value), formatted(inspected.value)
    # the same text, but for the frame of the caller (`return fn()` inside or outside the with block)
    assert len(a) == len(b)
    differ = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    assert len(differ) == 1 and "call_plain" in a[differ[0]] and "call_inspected" in b[differ[0]]
    # no frame of tensorscope's own code (its package folder; the checkout's folder may be named tensorscope too)
    assert str(Path(tensorscope.__file__).parent) not in "".join(b)
    assert nothing_installed()

    err = ValueError("mine")
    with pytest.raises(ValueError) as info:
        with tensorscope.inspect() as rep:
            raise err
    assert info.value is err and rep.diagnosis["kind"] == "other"


def test_a_decorated_function_raises_as_the_undecorated_one():
    decorated = tensorscope.inspect()(stale_save)
    with pytest.raises(RuntimeError) as plain:
        call_plain(stale_save)
    with pytest.raises(RuntimeError) as inspected:
        call_plain(decorated)
    assert formatted(plain.value) == formatted(inspected.value)
    assert decorated.report.diagnosis["culprit"]["line"] == line_of("tmp.mul_(2)  # the culprit")
    assert decorated.__name__ == "stale_save" and decorated.__wrapped__ is stale_save


def test_no_tensor_is_kept_alive_after_the_block():
    def inside_a_function():
        with tensorscope.inspect():
            x = torch.ones(3, requires_grad=True)
            y = x.sigmoid()
            v = y.detach()[1:]
            refs = [weakref.ref(t) for t in (x, y, v)]
        del x, y, v  # the function goes on without them: nothing of tensorscope's may hold them
        gc.collect()
        return [r() is None for r in refs]

    assert inside_a_function() == [True, True, True]

    def failing():
        with tensorscope.inspect():
            x = torch.ones(3, requires_grad=True)
            refs.append(weakref.ref(x))
            stale_save()

    refs = []
    with pytest.raises(RuntimeError) as info:
        failing()
    del info  # the traceback holds the frames, as without tensorscope
    gc.collect()
    assert refs[0]() is None


# --- nesting, re-entrance, threads ---------------------------------------------------------------

def test_nested_blocks_share_one_recording():
    with tensorscope.inspect() as outer:
        a = torch.zeros(3)
        a.add_(1)  # outer only
        with tensorscope.inspect() as inner:
            a.mul_(2)  # both
        assert not nothing_installed()  # the outer block still records
        a.sub_(1)  # outer only again
    assert nothing_installed()
    lines = lambda rep: [e["line"] for e in rep.events if e["kind"] == "write"]  # noqa: E731
    assert lines(inner) == [line_of("a.mul_(2)  # both")]
    assert lines(outer) == [line_of("a.add_(1)  # outer only"), line_of("a.mul_(2)  # both"),
                            line_of("a.sub_(1)  # outer only again")]
    with tensorscope.inspect():
        with tensorscope.inspect(ops=True, explain=True) as joined:
            pass
        with pytest.raises(RuntimeError, match="their devices must match"):
            with tensorscope.inspect(device="cpu"):
                pass
    assert joined.doc["command"] == "run"
    assert "joined a recording with explain=False, ops=False" in joined.doc["notes"][-1]
    assert nothing_installed()


@tensorscope.inspect()
def countdown(t, n):
    t.add_(1)
    if n:
        countdown(t, n - 1)
    return t


def test_a_decorated_function_may_call_itself():
    t = countdown(torch.zeros(2), 3)
    assert torch.equal(t, torch.full((2,), 4.0))
    writes = [e for e in countdown.report.events if e["kind"] == "write"]
    assert len(writes) == 4 and {e["line"] for e in writes} == {line_of("t.add_(1)")}
    assert nothing_installed()


def test_other_threads_are_recorded_while_a_block_runs():
    shared = torch.zeros(4)
    started, wrote = threading.Event(), threading.Event()

    def worker():
        started.wait()
        shared.add_(1)  # another thread, inside the block's lifetime
        wrote.set()

    thread = threading.Thread(target=worker)
    thread.start()
    with tensorscope.inspect() as rep:
        started.set()
        assert wrote.wait(30)
    thread.join()
    shared.add_(1)  # after the block: not recorded, and runs unwrapped
    writes = [e for e in rep.events if e["kind"] == "write"]
    assert [e["line"] for e in writes] == [line_of("shared.add_(1)  # another thread")]
    assert torch.equal(shared, torch.full((4,), 2.0)) and nothing_installed()


def test_a_block_on_another_thread_joins_the_running_one():
    reports = {}

    def worker():
        t = torch.zeros(2)
        with tensorscope.inspect() as reports["thread"]:
            t.mul_(3)  # the thread's own block

    with tensorscope.inspect() as outer:
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert not nothing_installed()  # the thread's block left, the outer one still records
    lines = lambda rep: [e["line"] for e in rep.events if e["kind"] == "write"]  # noqa: E731
    assert lines(reports["thread"]) == [line_of("t.mul_(3)  # the thread's own block")]
    assert lines(outer) == lines(reports["thread"])
    assert nothing_installed()


# --- cost and the command line -------------------------------------------------------------------

def test_import_tensorscope_does_not_import_torch(tmp_path):
    import subprocess
    import sys

    code = "import sys, tensorscope; print(sorted(m for m in ('torch', 'rich', 'IPython') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert out.stdout.strip() == "[]"


def test_inspect_inside_tensorscope_run_joins_the_run(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import torch, tensorscope\n"
        "x = torch.ones(3, requires_grad=True)\n"
        "with tensorscope.inspect() as rep:\n"
        "    y = x.detach()\n"
        "    y.mul_(2)\n"
        "print([(e['kind'], e['line']) for e in rep.events])\n")
    code, out, err, doc = run_cli("run", "--json", str(prog), cwd=tmp_path)
    assert code == 0, err
    assert "[('alias', 4), ('write', 5)]" in err  # the program's stdout goes to stderr under --json
    assert [(e["kind"], e["line"]) for e in doc["events"] if e["kind"] == "write"] == [("write", 5)]


def test_a_generator_function_is_refused_as_decorated():
    def gen():
        yield torch.ones(1)

    with pytest.raises(TypeError, match="decorates plain functions"):
        tensorscope.inspect()(gen)
    with pytest.raises(ValueError, match="device must be"):
        tensorscope.inspect(device="gpu")
