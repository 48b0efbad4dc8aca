"""tensorscope/compat.py on the torch and Python installed: each branch taken here is checked against torch.

The matrix (noxfile.py) runs this file on every (Python, torch) pair, so each branch of compat is
exercised on the releases that take it: the saved-hooks reader or its shadow, ``_storage_address``
or the storage object, ``sys.monitoring`` or ``sys.settrace``.
"""

from __future__ import annotations

import inspect as pyinspect
import json
import sys
import textwrap
import threading

import pytest
import torch

from _cli import load_report, run_cli, run_python
import tensorscope
from tensorscope import compat


def _program(tmp_path, src: str):
    path = tmp_path / "main.py"
    path.write_text(textwrap.dedent(src).lstrip("\n"))
    return path


def _calls_pack(fn) -> int:
    """How many times the pack hook on top of this thread's stack runs while ``fn`` saves a tensor."""
    calls = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: calls.append(1) or t, lambda t: t):
        fn()
    return len(calls)


def test_the_reader_of_the_hooks_stack_is_detected_not_assumed():
    has_reader = hasattr(torch._C._autograd, "_top_saved_tensors_default_hooks")
    assert compat.CAN_READ_SAVED_HOOKS is has_reader
    # the run wraps _push_/_pop_ exactly where there is no reader (see NOTE [Which saved-tensor hooks are on top])
    assert bool(compat.saved_hooks_patches()) is not has_reader


def test_push_and_pop_are_seen_by_torch_and_by_top_pack_hook():
    seen = []

    def pack(t):
        seen.append(tuple(t.shape))
        return t

    assert compat.top_pack_hook() is None
    compat.push_saved_tensors_hooks(pack, lambda t: t)
    try:
        assert compat.top_pack_hook() is pack
        torch.ones(2, requires_grad=True).sigmoid()  # sigmoid saves its output: torch calls the top pack hook
        assert seen == [(2,)]
    finally:
        compat.pop_saved_tensors_hooks()
    assert compat.top_pack_hook() is None
    torch.ones(3, requires_grad=True).sigmoid()
    assert seen == [(2,)]  # popped: torch calls it no more


def test_a_fresh_thread_meets_no_hook_of_this_one():
    """The version-error probe's premise: no saved-tensor hook of the caller, and autograd's own check."""
    errors = []

    def stale_backward():
        a = torch.ones(1, requires_grad=True)
        out = a.sigmoid()
        out.mul_(1)
        try:
            out.sum().backward()
        except RuntimeError as e:
            errors.append(str(e))

    names = [t.name for t in threading.enumerate()]
    assert _calls_pack(lambda: compat.in_fresh_thread(stale_backward)) == 0
    assert len(errors) == 1 and "modified by an inplace operation" in errors[0]
    assert _calls_pack(stale_backward) == 1 and len(errors) == 1  # here the hook sees it, and no check is made
    assert [t.name for t in threading.enumerate()] == names


def test_storage_key_is_the_storage_address():
    base = torch.arange(6.0)
    view, copy = base.view(2, 3)[1], base.clone()
    assert compat.storage_key(view) == compat.storage_key(base) == base.untyped_storage()._cdata
    assert compat.storage_key(copy) == copy.untyped_storage()._cdata != base.untyped_storage()._cdata


# A program that steps through its own saved_tensors_hooks: torch.func refuses inside them and runs
# outside them; tensorscope's hooks must step aside exactly when they are the innermost.
OWN_HOOKS = """
    import torch

    calls = []
    f = lambda x: (x.sin() ** 2).sum()
    x = torch.tensor([0.1, 0.2])
    print("outside", torch.func.grad(f)(x).tolist())
    with torch.autograd.graph.saved_tensors_hooks(lambda t: calls.append(t.shape) or t, lambda t: t):
        try:
            torch.func.grad(f)(x)
        except RuntimeError as e:
            print("inside:", str(e).split(".")[0])
        w = torch.ones(2, requires_grad=True)
        w.exp().sum().backward()
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            w.exp().sum().backward()
    print("program's hook saw", len(calls), "saves; grad", w.grad.tolist())
    print("after", torch.func.grad(f)(x).tolist())
    a = torch.ones(1, requires_grad=True)
    out = a.sigmoid()
    out.mul_(2)
    out.sum().backward()
"""


def test_programs_own_hooks_under_explain(tmp_path):
    path = _program(tmp_path, OWN_HOOKS)
    plain = run_python(path, cwd=tmp_path, fresh=False)
    code, out, err, _ = run_cli("explain", "-o", "r.json", str(path), cwd=tmp_path)
    assert plain[0] == 1 and "inside: " in plain[1] and "saw 1 saves" in plain[1], plain
    assert out == plain[1], err[-2000:]
    assert err.strip().splitlines()[-1] == plain[2].strip().splitlines()[-1]  # the version error, byte for byte
    doc = load_report((tmp_path / "r.json").read_text())
    assert code == 1 and doc["diagnosis"]["kind"] == "inplace-modified-saved-tensor", err[-2000:]


# A NumPy write into a saved buffer, made inside a helper while the program traces itself.
TRACED = """
    import sys

    import numpy as np
    import torch

    lines = []

    def tracer(frame, event, arg):
        if frame.f_code.co_filename == __file__:
            lines.append(event)
            return tracer
        return None

    def refill(view, step):
        view[...] = step
        return view

    {start}
    feats = torch.ones(2, 3)
    view = feats.numpy()
    w = torch.ones(3, 1, requires_grad=True)
    out = feats @ w
    refill(view, 7.0)
    out.sum().backward()
    {stop}
    print(w.grad.flatten().tolist(), len(lines), lines.count("line"))
"""
SETTRACE = ("sys.settrace(tracer)", "sys.settrace(None)")
MONITORING = ("""mon = sys.monitoring
    mon.use_tool_id(mon.DEBUGGER_ID, "program")
    mon.register_callback(mon.DEBUGGER_ID, mon.events.LINE,
                         lambda code, line: lines.append("line") if code.co_filename == __file__ else mon.DISABLE)
    mon.set_events(mon.DEBUGGER_ID, mon.events.LINE)""", "mon.set_events(mon.DEBUGGER_ID, 0)")


def _traced(tmp_path, start_stop):
    start, stop = start_stop
    path = _program(tmp_path, TRACED.replace("{start}", start).replace("{stop}", stop))
    plain = run_python(path, cwd=tmp_path, fresh=False)
    code, out, err, _ = run_cli("explain", "-o", "r.json", str(path), cwd=tmp_path)
    assert plain[0] == 0 and code == 1, (plain, err[-2000:])  # 1: the hazard (a changed fingerprint) is found
    assert out == plain[1]  # the program's tracer saw the same events
    hazards = json.loads((tmp_path / "r.json").read_text())["hazards"]
    assert hazards and hazards[0]["kind"] == "silent-saved-tensor-write", hazards
    lines = path.read_text().splitlines()
    return hazards[0]["culprit"]["line"], lines.index("    view[...] = step") + 1, lines.index("view = feats.numpy()") + 1


def test_the_programs_tracer_keeps_its_events(tmp_path):
    culprit, helper, shared = _traced(tmp_path, SETTRACE)
    if compat.monitoring is None:  # settrace only: the program's tracer wins, nothing is watched,
        assert culprit == shared  # and the hazard names the line that shared the memory with NumPy
    else:  # sys.monitoring watches beside it and names the helper's line that wrote
        assert culprit == helper


@pytest.mark.skipif(compat.monitoring is None, reason="sys.monitoring is Python 3.12 and later")
def test_the_programs_monitoring_tool_keeps_its_events(tmp_path):
    culprit, helper, _ = _traced(tmp_path, MONITORING)
    assert culprit == helper


def test_monitoring_is_detected_not_assumed():
    assert (compat.monitoring is not None) is hasattr(sys, "monitoring")


# Two blocks in one process: each finds the helper's write, and leaves no monitoring tool behind.
TWICE = """
    import sys

    import torch
    import tensorscope

    def refill(view, step):
        view[...] = step
        return view

    def block():
        with tensorscope.inspect(explain=True) as rep:
            feats = torch.ones(2, 3)
            view = feats.numpy()
            w = torch.ones(3, 1, requires_grad=True)
            out = feats @ w
            refill(view, 7.0)
            out.sum().backward()
        mon = getattr(sys, "monitoring", None)
        held = [t for t in (3, 4) if mon is not None and mon.get_tool(t) is not None]
        print([h["culprit"]["line"] for h in rep.hazards if h["kind"] == "silent-saved-tensor-write"], held,
              sys.gettrace() is None, w.grad.flatten().tolist())

    block()
    block()
"""


def test_each_run_watches_afresh_and_leaves_no_tool_behind(tmp_path):
    path = _program(tmp_path, TWICE)
    code, out, err = run_python(path, cwd=tmp_path)[:3]
    assert code == 0, err[-2000:]
    lines = path.read_text().splitlines()
    helper = lines.index("    view[...] = step") + 1  # sys.monitoring or settrace: the helper's line
    expected = f"[{helper}] [] True [14.0, 14.0, 14.0]"  # the gradient torch computes from the changed bytes
    assert out.splitlines() == [expected, expected], out


# --- the stale saved tensor under `run`: read off the graph, or described by torch's error text -----------
# (see NOTE [Reading a saved tensor without its checks]); each case raises the version error only because
# of its marked write (checked with the write left out), and the report names that write.

def saved_output(write=True):
    x = torch.ones(3, requires_grad=True)
    z = (x * 2).sigmoid()  # SigmoidBackward0 saves its output
    if write:
        z.detach().mul_(2)  # culprit: output
    z.sum().backward()


def saved_input(write=True):
    x = torch.ones(3, requires_grad=True)
    w = torch.ones(3, requires_grad=True)
    h = x + 1  # AddBackward0 saves nothing
    y = h * w  # MulBackward0 saves h, made by the next function AddBackward0
    if write:
        h.mul_(3)  # culprit: input
    y.sum().backward()


def two_alike(write=True):
    x = torch.ones(3, requires_grad=True)
    p, q = x.sigmoid(), x.sigmoid()  # two outputs alike but for the node that made them
    p.detach().mul_(2)
    if write:
        q.detach().mul_(2)  # culprit: the one backward meets
    q.sum().backward()


def through_a_view(write=True):
    x = torch.ones(4, requires_grad=True)
    z = x.sigmoid()  # SigmoidBackward0 saves z
    head = z[:2]
    if write:
        head.zero_()  # culprit: rebases z onto CopySlices
    z.sum().backward()


def written_itself(write=True):
    x = torch.ones(3, requires_grad=True)
    z = (x * 2).tanh()  # TanhBackward0 saves its output
    if write:
        z.add_(1)  # culprit: rebases z onto AddBackward0 (torch before 2.10 names TanhBackward0)
    z.sum().backward()


def saved_constant(write=True):
    x = torch.ones(3, requires_grad=True)
    c = torch.ones(3)
    y = x * c  # saves c, which no node made
    if write:
        c.add_(1)  # culprit: constant
    y.sum().backward()


def view_remade_after_write(write=True):
    x = torch.ones(3, requires_grad=True)
    y = torch.tensor([2.0, 4.0, 6.0], requires_grad=True).view(-1, 1)  # a view: ViewBackward0
    z = torch.matmul(x, y)  # MmBackward0 saves y
    if write:
        y.detach().mul_(2)  # culprit: y's node is remade (AsStridedBackward0) when next read
    z.backward()


STALE_CASES = [saved_output, saved_input, two_alike, through_a_view, written_itself, saved_constant,
               view_remade_after_write]


@pytest.mark.parametrize("case", STALE_CASES)
def test_a_decorated_function_names_the_write_on_every_release(case):
    _names_the_write(case)


@pytest.mark.parametrize("case", STALE_CASES)
def test_the_error_text_names_the_write_where_saved_data_cannot_be_read(case, monkeypatch):
    # the reader of torch before 2.10 (no SavedTensor.data), taken on this torch too: the stale tensor is
    # the live one torch's error text describes (stale.named_by_error)
    monkeypatch.setattr(compat, "CAN_READ_SAVED_DATA", False)
    _names_the_write(case)


def _names_the_write(case):
    case(write=False)  # torch: without the write, backward runs
    with pytest.raises(RuntimeError) as plain:
        case()
    assert "modified by an inplace operation" in str(plain.value)
    decorated = tensorscope.inspect()(case)
    with pytest.raises(RuntimeError) as inspected:
        decorated()
    assert str(inspected.value) == str(plain.value)
    source = pyinspect.getsource(case).splitlines()
    marked = [i for i, text in enumerate(source) if "# culprit" in text]
    culprit = decorated.report.diagnosis["culprit"]
    assert culprit is not None and culprit["line"] == case.__code__.co_firstlineno + marked[0], culprit


def test_the_origin_is_pinned_on_every_release_and_the_mode_only_where_it_does_not_crash(tmp_path, monkeypatch):
    # NOTE [The origin mode crashes torch before 2.11]: the one difference keyed on the release. The origin
    # is read from the graph on every release (NOTE [Origins from the graph]); the opt-in per-op mode is
    # ignored, with a note, where it would crash.
    assert compat._release("2.10.0+cu128") == (2, 10) and compat._release("2.11.0a0+git1234") == (2, 11)
    assert compat._release("2.9.1") == (2, 9) and compat._release("3.0.0") == (3, 0)
    prog = tmp_path / "nan.py"
    prog.write_text("import torch\nw = torch.zeros(3, requires_grad=True)\nx = torch.log(w * 0)\n"
                    "x.sum().backward()\nprint(w.grad.isnan().any().item())\n")
    safe = compat._release(torch.__version__) >= (2, 11)
    assert compat.DISPATCH_MODE_OVER_BACKWARD_SAFE is safe
    for mode in ("0", "1"):
        monkeypatch.setenv("TENSORSCOPE_ORIGIN_MODE", mode)
        rc, out, err, doc = run_cli("explain", "--json", str(prog))
        notes = " ".join(doc.get("notes") or [])
        assert ("TENSORSCOPE_ORIGIN_MODE is ignored" in notes) is (mode == "1" and not safe), notes
        nf = [h for h in doc.get("hazards") or [] if h["kind"] == "silent-non-finite-value"]
        # the origin is the log at line 3, forward, by either mechanism
        assert nf and nf[0]["nonfinite"]["op"].endswith("log") and nf[0]["culprit"]["line"] == 3, nf


# Writes through every form of receiver; `# alias: TEXT` is the expression each write goes through
# (two for a line of two writes). `# or none` marks a line where a Python without column positions
# (3.10) may name no alias: two like calls on one line cannot be told apart from the bytecode.
ALIASES = """
    import torch


    class M:
        def __init__(self):
            self.h = torch.zeros(3)


    m = M()
    state = {"k": torch.zeros(3)}
    base = torch.zeros(4)
    tmp = base[:3]
    tmp.mul_(2)  # alias: tmp
    m.h.add_(1)  # alias: m.h
    state["k"].add_(1).mul_(3)  # alias: state['k'] | state['k'].add_(1)
    base[0] = 5  # alias: base
    base += 1  # alias: base
    torch.relu_(tmp)  # alias: tmp
    a, b = torch.zeros(2), torch.zeros(2)
    a.mul_(2); b.mul_(3)  # alias: a | b  # or none
    x = torch.ones(3, requires_grad=True)
    y = x.sigmoid()
    view = y[:2]
    view.zero_()  # alias: view
    y.sum().backward()
"""


def test_the_alias_a_write_went_through_is_named_on_every_python(tmp_path):
    # 3.11+ slice it out with co_positions, 3.10 matches the call's bytecode to the line's syntax
    # tree (NOTE [The executing call from bytecode and the line's syntax tree]): never a wrong name
    path = _program(tmp_path, ALIASES)
    plain = run_python(path, cwd=tmp_path, fresh=False)
    assert plain[0] == 1 and "modified by an inplace operation" in plain[2], plain  # torch: the write is seen
    code, out, err, _ = run_cli("run", "-o", "r.json", str(path), cwd=tmp_path)
    doc = json.loads((tmp_path / "r.json").read_text())
    lines = path.read_text().splitlines()
    want = {i + 1: text.split("# alias: ")[1].split("  #")[0].split(" | ") for i, text in enumerate(lines)
            if "# alias: " in text}
    maybe_none = {i + 1 for i, text in enumerate(lines) if "# or none" in text}
    got: dict = {}
    for e in doc["events"]:
        if e["kind"] == "write":
            got.setdefault(e["line"], []).append(e["alias"])
    columns = hasattr(compile("0", "<s>", "eval"), "co_positions")
    for line, aliases in want.items():
        if not columns and line in maybe_none and got.get(line) == [None] * len(aliases):
            continue
        assert got.get(line) == aliases, (line, got.get(line), aliases)
    culprit = doc["diagnosis"]["culprit"]
    assert code == plain[0] and (culprit["line"], culprit["alias"]) == (lines.index("view.zero_()  # alias: view") + 1, "view"), culprit


UNUSED_REBOUND = """
    import torch

    W = torch.randn(3, requires_grad=True)
    x = torch.randn(3, requires_grad=True)
    loss = (W * x).sum()
    W = W * 1.0
    gx, gW = torch.autograd.grad(loss, [x, W])
"""


def test_the_unused_input_is_named_whether_or_not_the_message_gives_its_index(tmp_path):
    """NOTE [The unused input's index before torch 2.9]: torch's own message either names index 1 or no index
    (2.2 to 2.8); either way the culprit is `W`, rebound at line 6 after the outputs used the old tensor."""
    prog = _program(tmp_path, UNUSED_REBOUND)
    rc, _, err = run_python(prog, cwd=tmp_path, fresh=False)
    last = err.strip().splitlines()[-1]
    assert rc == 1 and "appears to not have been used in the graph" in last
    assert compat.unused_input_without_index(last) is ("at index" not in last)
    rc, out, err, doc = run_cli("explain", "--json", str(prog), cwd=tmp_path)
    d = doc["diagnosis"]
    assert (d["kind"], d["culprit"]["line"], d["culprit"]["alias"]) == ("unused-input", 6, "W"), d


def test_the_node_that_saved_a_tensor_detached_in_place_is_named_under_run():
    """NOTE [Reading a saved tensor without its checks]: where torch cannot read a saved tensor without its
    checks (2.2 to 2.9), the getter's value is used; `node._saved_self` does not raise for a tensor detached
    in place, so `run` names the saving node on every release (MulBackward0 of `h * h`)."""
    from _cli import REPO

    prog = REPO / "tests" / "programs" / "kinds" / "saved_detached_inplace.py"
    rc, out, err, doc = run_cli("run", "--json", str(prog), cwd=prog.parent)
    d = doc["diagnosis"]
    assert (d["kind"], d["culprit"]["line"], (d.get("saved_by") or {}).get("node")) == \
        ("saved-detached-inplace", 6, "MulBackward0"), d


# NOTE [Saved tensors read back]: the walk that finds where a NaN was made reads a node's saved tensors by name
# (layer_norm's mean and rstd, addmm's operands). torch before 2.10 has no SavedTensor.data; there they are read
# through the node's getter, which runs explain's own unpack hook. The reader of those releases is taken on this
# torch too (a wrapper that switches SavedTensor.data off before the CLI starts), beside the ordinary one.
OVERFLOW_BEFORE_LAYER_NORM = """\
import torch
torch.manual_seed(0)
h = torch.rand(2, 8) * 4.0 + 8.0
wo = torch.nn.Linear(8, 4)
with torch.no_grad():
    wo.weight.fill_(1e37)
out = wo(h)
normed = torch.nn.functional.layer_norm(out, (4,))
loss = normed.pow(2).mean()
loss.backward()
print(out.isinf().any().item(), h.isfinite().all().item(), loss.isnan().item())
"""
WITHOUT_SAVED_DATA = """\
import sys
from tensorscope import compat
from tensorscope.cli import main
compat.CAN_READ_SAVED_DATA = False  # as on torch 2.2 to 2.9
sys.argv = ["tensorscope", *sys.argv[1:]]
main()
"""


def test_the_origin_under_a_layer_norm_is_found_with_or_without_saved_data(tmp_path):
    prog = tmp_path / "overflow.py"
    prog.write_text(OVERFLOW_BEFORE_LAYER_NORM)
    rc, out, err = run_python(prog, fresh=False)
    # torch: the Linear's output (line 7) overflows float32 from finite inputs; layer_norm makes it NaN
    assert rc == 0 and out.split() == ["True", "True", "True"], (out, err)
    wrapper = tmp_path / "without_saved_data.py"
    wrapper.write_text(WITHOUT_SAVED_DATA)
    for how, (rc, stdout, err) in {"SavedTensor.data": run_cli("explain", "--json", str(prog))[:3],
                                   "the getter": run_python(wrapper, "explain", "--json", str(prog), fresh=False)}.items():
        doc = json.loads(stdout)
        nf = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
        assert nf and (nf[0]["nonfinite"]["op"], nf[0]["culprit"]["line"], nf[0]["nonfinite"]["data"]) == \
            ("aten.addmm", 7, False), (how, nf, err)
