"""Run every program in snippets/ under the real `tensorscope` CLI and check its report.

Each fact test rebuilds the snippet's tensors in this process with torch and asserts
that the JSON document agrees with what torch itself says (storage identity via
`untyped_storage()._cdata`, version-counter sharing probed by bumping a version,
strides, versions, autograd flags, exception text). Expected values are never
taken from tensorscope.

All runs (plain python, `-o report.json`, `--json`) are started up front by the `runs` fixture, each
forked from a process that imported torch once (tests/_forked.py): python's from the test process's
fork server, tensorscope's in one run_many beside them, so the whole file stays fast. The snippets'
subject is what they print, raise and compute; how a program starts and ends under tensorscope is
compared with fresh interpreters in tests/test_transparency.py. `run -o R.json` writes the same
document as `run --json` (docs/CONTRACT.md, output forms), so the document tests read the -o
report of the run test_same_as_python already makes, and the program's own output from that
run's stdout and stderr; a real `run --json` is made for the JSON_MODE snippets (a fine one and a
raising one), where test_json_document also checks the program's stdout moved to stderr.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from tensorscope import compat

try:
    from _cli import (SNIPPETS_DIR, counter_by_id, find_events, find_tensor, find_tensors, load_report,
                      line_of, run_cli, run_many, run_python, storage_by_id, tensor_by_id,
                      validate_against_schema)
except ImportError:  # tests/ became a package
    from tests._cli import (SNIPPETS_DIR, counter_by_id, find_events, find_tensor, find_tensors,
                            line_of, run_cli, run_many, run_python, storage_by_id, tensor_by_id,
                            validate_against_schema)

SNIPPETS = sorted(p.name for p in SNIPPETS_DIR.glob("*.py"))

# Snippets that end with an uncaught exception under plain python (see snippets/README.md).
RAISING = {
    "as_strided_in_and_out_of_range.py": "RuntimeError",
    "inplace_after_detach_breaks_backward.py": "RuntimeError",
    "view_write_before_matmul_backward.py": "RuntimeError",
}


# `run --json` itself (one document on stdout, the program's stdout on stderr) on these; every other
# snippet's document is its `run -o R.json` report (one torch start-up fewer per snippet).
JSON_MODE = ("inplace_after_detach_breaks_backward.py", "view_shares_storage.py")

# --------------------------------------------------------------------------- running


class Runs:
    """Caches the three subprocess runs of each snippet; starts them all in parallel."""

    def __init__(self, tmp_dir: Path):
        self.tmp_dir = tmp_dir
        self.pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
        self.futures: dict[tuple[str, str], Future] = {}

    def _submit(self, what: str, snippet: str) -> Future:
        key = (what, snippet)
        if key not in self.futures:
            path = str(SNIPPETS_DIR / snippet)
            if what in ("json", "explain"):
                fut = self.pool.submit(run_cli, "run" if what == "json" else "explain", "--json", path)
            elif what == "python":
                fut = self.pool.submit(run_python, path, fresh=False)
            else:
                report = self._report_path(snippet)
                fut = self.pool.submit(lambda: (*run_cli("run", "-o", str(report), path)[:3], report))
            self.futures[key] = fut
        return self.futures[key]

    def _report_path(self, snippet: str) -> Path:
        return self.tmp_dir / (Path(snippet).stem + ".report.json")

    def prefetch(self, json_for=(), identity_for=()):
        """Start the runs the tests will ask for: python's (the reference) forked from the fork server,
        beside every tensorscope run forked from one process that imported torch once (run_many)."""
        keys = [k for s in identity_for for k in (("python", s), ("report", s))]
        keys += [("json" if s in JSON_MODE else "report", s) for s in json_for]
        ours = [k for k in dict.fromkeys(keys) if k[0] != "python" and k not in self.futures]
        if ours:
            jobs = [("tensorscope", "run", "--json", str(SNIPPETS_DIR / s)) if what == "json"
                    else ("tensorscope", "run", "-o", str(self._report_path(s)), str(SNIPPETS_DIR / s))
                    for what, s in ours]
            for k in ours:
                self.futures[k] = Future()
            batch = self.pool.submit(run_many, jobs)

            def done(batch, ours=ours):
                try:
                    results = batch.result()
                except BaseException as e:  # noqa: BLE001 - each test that asks sees it
                    for k in ours:
                        self.futures[k].set_exception(e)
                    return
                for (what, s), (rc, out, err, doc) in zip(ours, results):
                    self.futures[(what, s)].set_result((rc, out, err, doc) if what == "json"
                                                       else (rc, out, err, self._report_path(s)))

            batch.add_done_callback(done)
        for what, s in keys:
            if what == "python":
                self._submit("python", s)

    def json(self, snippet: str, command: str = "run"):
        """(returncode, stdout, output, doc) of `tensorscope run --json SNIPPET` (or explain): OUTPUT
        holds the program's own output (stderr under --json). Outside JSON_MODE the run is `run -o
        R.json SNIPPET`: DOC is R.json's document and OUTPUT the run's stdout then stderr."""
        if command == "run" and snippet not in JSON_MODE:
            rc, out, err, report = self.report(snippet)
            try:
                doc = load_report(report.read_text())
            except (OSError, ValueError):
                doc = None
            return rc, out, out + err, doc
        return self._submit("json" if command == "run" else "explain", snippet).result()

    def python(self, snippet: str):
        """(returncode, stdout, stderr) of `python SNIPPET`."""
        return self._submit("python", snippet).result()

    def report(self, snippet: str):
        """(returncode, stdout, stderr, report_path) of `tensorscope run -o R.json SNIPPET`."""
        return self._submit("report", snippet).result()


@pytest.fixture(scope="session")
def runs(request, tmp_path_factory):
    here = Path(__file__).resolve()
    json_for, identity_for = set(), set()
    for item in request.session.items:
        if Path(str(item.fspath)).resolve() != here:
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "snippet" in params:
            json_for.add(params["snippet"])
            identity_for.add(params["snippet"])
        name = getattr(item, "originalname", item.name)
        if name.startswith("test_facts_"):
            json_for.add(name[len("test_facts_"):] + ".py")
    r = Runs(tmp_path_factory.mktemp("reports"))
    r.prefetch(sorted(json_for), sorted(identity_for))
    yield r
    r.pool.shutdown(wait=False, cancel_futures=True)   # e.g. after -x: drop queued runs


def doc_of(runs: Runs, snippet: str, command: str = "run") -> tuple[dict, str]:
    """The JSON document of SNIPPET (asserting it is one JSON document) and the program's output
    (see Runs.json)."""
    rc, out, err, doc = runs.json(snippet, command)
    assert doc is not None, f"`tensorscope {command} {snippet}` (--json or -o R.json) gave no JSON " \
                            f"document (rc={rc}).\nstdout:\n{out[-2000:]}\nstderr:\n{err[-3000:]}"
    if command == "run":
        assert rc == doc["program"]["exit_status"], (rc, doc["program"])
    return doc, err


# ------------------------------------------------------------------- torch-side truth


def shares_version_counter(p: torch.Tensor, q: torch.Tensor) -> bool:
    """Probe: bump p's version, see whether q's moved, then restore p's version."""
    if p is q:
        return True
    old_p, old_q = p._version, q._version
    try:
        torch._C._increment_version((p,))
    except (TypeError, RuntimeError):  # torch 2.2 takes one tensor, not a tuple
        torch._C._increment_version(p)
    shared = q._version != old_q
    try:
        torch._C._autograd._unsafe_set_version_counter((p,), (old_p,))
    except (TypeError, RuntimeError):
        torch._C._autograd._unsafe_set_version_counter(p, old_p)
    return shared


def same_storage(p: torch.Tensor, q: torch.Tensor) -> bool:
    return p.untyped_storage()._cdata == q.untyped_storage()._cdata


def grad_fn_name(t: torch.Tensor):
    # the class name, as printed in `grad_fn=<...>` (node.name() says "torch::autograd::CopyBackwards")
    return None if t.grad_fn is None else type(t.grad_fn).__name__


def byte_range(t: torch.Tensor) -> list[int]:
    start = t.storage_offset() * t.element_size()
    if t.numel() == 0:
        return [start, start]
    extent = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return [start, start + extent * t.element_size()]


def check_tensor(doc: dict, rec: dict, t: torch.Tensor, label: str, alive: bool = True):
    """Every per-tensor field of REC against the real tensor T."""
    ctx = f"tensor {label!r} ({rec.get('id')})"
    assert rec["shape"] == list(t.shape), ctx
    assert rec["stride"] == list(t.stride()), ctx
    assert rec["dtype"] == str(t.dtype).removeprefix("torch."), ctx
    assert rec["device"] == str(t.device), ctx
    assert rec["storage_offset"] == t.storage_offset(), ctx
    assert rec["version"] == t._version, f"{ctx}: version {rec['version']} != torch {t._version}"
    assert rec["requires_grad"] is t.requires_grad, ctx
    assert rec["is_leaf"] is t.is_leaf, ctx
    assert rec["grad_fn"] == grad_fn_name(t), ctx
    # has_grad: null for non-leaves (reading .grad of a non-leaf only warns)
    assert rec["has_grad"] == (None if not t.is_leaf else t.grad is not None), \
        f"{ctx}: has_grad {rec['has_grad']!r}"
    assert rec["byte_range"] == byte_range(t), ctx
    if t.is_contiguous():
        assert rec["nbytes"] == t.nbytes, ctx
    if alive:
        assert rec["alive"] is True, ctx
    storage = storage_by_id(doc, rec["storage"])
    assert storage["nbytes"] == t.untyped_storage().nbytes(), ctx
    assert storage["device"] == str(t.device), ctx
    assert rec["id"] in storage["tensors"], ctx
    assert rec["data_ptr"] == storage["data_ptr"] + t.storage_offset() * t.element_size(), ctx
    assert rec["id"] in counter_by_id(doc, rec["version_counter"])["tensors"], ctx


def check_tensors(doc: dict, real: dict[str, torch.Tensor], alive: bool = True) -> dict[str, dict]:
    """Look each name up in DOC, check its fields, and check every pair's sharing."""
    recs = {name: find_tensor(doc, name) for name in real}
    for name, t in real.items():
        check_tensor(doc, recs[name], t, name, alive=alive)
    names = list(real)
    for i, p in enumerate(names):
        for q in names[i + 1:]:
            tp, tq, rp, rq = real[p], real[q], recs[p], recs[q]
            s = same_storage(tp, tq)
            assert (rp["storage"] == rq["storage"]) is s, \
                f"{p!r} and {q!r}: torch says same storage={s}, report has {rp['storage']} / {rq['storage']}"
            v = shares_version_counter(tp, tq)
            assert (rp["version_counter"] == rq["version_counter"]) is v, \
                f"{p!r} and {q!r}: torch says shared version counter={v}, report has " \
                f"{rp['version_counter']} / {rq['version_counter']}"
            if s:
                assert rp["data_ptr"] - rq["data_ptr"] == tp.data_ptr() - tq.data_ptr(), (p, q)
    return recs


def check_view_of(doc: dict, rec: dict, t: torch.Tensor, source: dict | None = None):
    """A real view must name a tensor in the same storage (its source or the root base);
    a tensor that is not a view of anything must have view_of null."""
    if not t._is_view():
        assert rec["view_of"] is None, f"{rec['names']} is not a view but view_of={rec['view_of']}"
        return
    assert rec["view_of"] is not None, f"{rec['names']} is a view (torch _is_view) but view_of is null"
    base = tensor_by_id(doc, rec["view_of"])
    assert base["storage"] == rec["storage"], (rec["names"], base["names"])
    if source is not None and rec["view_of"] != source["id"]:
        # allowed: the root base (which is not a view itself)
        assert base["view_of"] is None, (rec["names"], base["names"])


def check_exit(doc: dict, snippet: str, raised: BaseException | None, line_code: str | None = None):
    prog = doc["program"]
    assert Path(prog["path"]).resolve() == (SNIPPETS_DIR / snippet).resolve()
    if raised is None:
        assert prog["exit_status"] == 0
        assert prog["exception"] is None
        return
    assert prog["exit_status"] == 1
    exc = prog["exception"]
    assert exc is not None
    assert exc["type"] == type(raised).__name__
    assert exc["message"] == str(raised)
    if line_code is not None:
        assert exc["line"] == line_of(SNIPPETS_DIR / snippet, line_code)
        assert Path(exc["file"]).resolve() == (SNIPPETS_DIR / snippet).resolve()


def ids(*recs: dict) -> set[str]:
    return {r["id"] for r in recs}


def written_ids(event: dict) -> set[str]:
    """The tensor written through plus `also_changed` (CONTRACT.md lists {"id", "names"}
    objects there, the schema plain ids: accept both)."""
    return {event["tensor"]} | {c["id"] if isinstance(c, dict) else c
                                for c in event.get("also_changed") or []}


def assert_program_printed(err: str, *lines: str):
    """ERR: the program's own output under tensorscope (see Runs.json)."""
    for line in lines:
        assert line in err, f"program output {line!r} missing from stderr:\n{err[-3000:]}"


def saved_by_node(root: torch.Tensor, saved: torch.Tensor) -> str:
    """Name of the graph node under ROOT that saved SAVED (by data_ptr and shape)."""
    seen, stack = set(), [root.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for attr in dir(node):
            if attr.startswith("_saved_"):   # unpacks: call this before any in-place write
                val = getattr(node, attr)
                if isinstance(val, torch.Tensor) and val.data_ptr() == saved.data_ptr() \
                        and val.shape == saved.shape:
                    return type(node).__name__
        stack.extend(n for n, _ in node.next_functions)
    raise AssertionError("no node saved the tensor")


def check_inplace_diagnosis(doc, snippet, *, tensor_name, culprit_code, alias, node, saved_code,
                            backward_code):
    """`explain` names the saving line (its saved-tensor hooks saw it); `run` registers no hooks and, on
    Python 3.10 and 3.11, leaves it unknown unless recorded lines bracket the node (see NOTE [Hooks only under
    explain]); from 3.12 it hears the program's lines (NOTE [Forward lines from line events]) and names it."""
    path = SNIPPETS_DIR / snippet
    diag = doc["diagnosis"]
    assert diag is not None, "backward failed but diagnosis is null"
    assert diag["kind"] == "inplace-modified-saved-tensor"
    assert diag["culprit"]["line"] == line_of(path, culprit_code)
    assert diag["culprit"]["alias"] == alias
    assert diag["saved_by"]["node"] == node
    if doc["command"] == "explain" or compat.monitoring is not None:  # 3.12+: run hears every line
        assert diag["saved_by"]["line"] == line_of(path, saved_code)
    else:
        assert diag["saved_by"]["line"] is None and "tensorscope explain" in diag["explanation"]
    assert diag["backward"]["line"] == line_of(path, backward_code)
    assert tensor_name in diag["tensor"]["names"]
    assert diag["tensor"]["version_at_save"] == 0
    assert diag["tensor"]["version_now"] == 1


# ------------------------------------------------------ generic, one test per snippet


@pytest.mark.parametrize("snippet", SNIPPETS)
def test_same_as_python(snippet, runs):
    """`tensorscope run -o report.json X.py` is byte-for-byte `python X.py`."""
    py_rc, py_out, py_err = runs.python(snippet)
    assert py_rc == (1 if snippet in RAISING else 0), f"plain python exit status {py_rc}\n{py_err}"
    rc, out, err, report = runs.report(snippet)
    assert out == py_out
    assert err == py_err
    assert rc == py_rc
    assert report.exists(), "-o FILE was not written"
    doc = load_report(report.read_text())
    assert doc["program"]["exit_status"] == py_rc
    validate_against_schema(doc)


@pytest.mark.parametrize("snippet", SNIPPETS)
def test_json_document(snippet, runs):
    """`--json`: one schema-valid document, internally consistent, program output on stderr."""
    py_rc, py_out, py_err = runs.python(snippet)
    doc, err = doc_of(runs, snippet)
    validate_against_schema(doc)
    assert doc["schema_version"] == 4
    assert doc["command"] == "run"
    assert doc["torch_version"] == torch.__version__
    prog = doc["program"]
    assert Path(prog["path"]).resolve() == (SNIPPETS_DIR / snippet).resolve()
    assert prog["exit_status"] == py_rc
    if snippet in RAISING:
        assert prog["exception"]["type"] == RAISING[snippet]
        assert py_err.rstrip().splitlines()[-1] == f"{prog['exception']['type']}: {prog['exception']['message']}"
    else:
        assert prog["exception"] is None
    if snippet in JSON_MODE:
        for line in py_out.splitlines():
            assert line in err, f"program stdout line {line!r} not on stderr under --json"
    tensor_ids = {t["id"] for t in doc["tensors"]}
    assert len(tensor_ids) == len(doc["tensors"]), "duplicate tensor ids"
    for s in doc["storages"]:
        for tid in s["tensors"]:
            assert tensor_by_id(doc, tid)["storage"] == s["id"]
    for v in doc["version_counters"]:
        for tid in v["tensors"]:
            assert tensor_by_id(doc, tid)["version_counter"] == v["id"]
    for t in doc["tensors"]:
        # sharing is only meaningful among tensors alive at the same moment: a dead
        # temporary (e.g. the result of `y.data`) may have no counter or storage listing
        if t["alive"]:
            assert t["id"] in storage_by_id(doc, t["storage"])["tensors"], t
            assert t["id"] in counter_by_id(doc, t["version_counter"])["tensors"], t
        if t["view_of"] is not None:
            assert tensor_by_id(doc, t["view_of"])["storage"] == t["storage"]


# ------------------------------------------------------------- facts, one per snippet


def test_facts_clone_stays_in_graph(runs):
    torch.manual_seed(0)
    a = torch.tensor(1.0, requires_grad=True)
    b = a.clone()
    y = a ** 2
    y.backward()
    after_y = a.grad.item()
    z = b * 3
    z.backward()
    assert (after_y, a.grad.item()) == (2.0, 5.0)

    doc, err = doc_of(runs, "clone_stays_in_graph.py")
    check_exit(doc, "clone_stays_in_graph.py", None)
    recs = check_tensors(doc, {"a": a, "b": b, "y": y, "z": z})
    assert recs["a"]["storage"] != recs["b"]["storage"]
    assert recs["b"]["grad_fn"] == "CloneBackward0" and recs["b"]["has_grad"] is None
    assert recs["a"]["has_grad"] is True
    check_view_of(doc, recs["b"], b)
    assert find_events(doc, "copy", op="clone", tensor=recs["b"]["id"], source=recs["a"]["id"])
    assert [e["ok"] for e in find_events(doc, "backward")] == [True, True]
    assert doc["diagnosis"] is None
    assert_program_printed(err, f"a.grad after y.backward(): {after_y}",
                           f"a.grad after z.backward(): {a.grad.item()}")


def test_facts_detach_shares_storage_and_version(runs):
    torch.manual_seed(0)
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    d = a.detach()
    d.mul_(2)
    assert same_storage(a, d) and shares_version_counter(a, d) and a._version == d._version == 1

    doc, err = doc_of(runs, "detach_shares_storage_and_version.py")
    check_exit(doc, "detach_shares_storage_and_version.py", None)
    recs = check_tensors(doc, {"a": a, "d": d})
    assert recs["a"]["storage"] == recs["d"]["storage"]
    assert recs["a"]["version_counter"] == recs["d"]["version_counter"]
    assert recs["d"]["requires_grad"] is False and recs["d"]["grad_fn"] is None
    assert find_events(doc, "alias", op="detach", tensor=recs["d"]["id"], base=recs["a"]["id"],
                       shares_version_counter=True)
    writes = find_events(doc, "write", op="mul_", alias="d")
    assert len(writes) == 1
    assert (writes[0]["version_before"], writes[0]["version_after"]) == (0, 1)
    assert ids(recs["a"], recs["d"]) <= written_ids(writes[0])
    assert_program_printed(err, f"a after d.mul_(2): {a.tolist()}")


def test_facts_clone_detach_independent_copy(runs):
    torch.manual_seed(0)
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    c = a.clone().detach()
    c.add_(10)
    a.sum().backward()
    assert not same_storage(a, c) and not shares_version_counter(a, c)

    doc, err = doc_of(runs, "clone_detach_independent_copy.py")
    check_exit(doc, "clone_detach_independent_copy.py", None)
    recs = check_tensors(doc, {"a": a, "c": c})
    assert recs["a"]["storage"] != recs["c"]["storage"]
    assert recs["a"]["version_counter"] != recs["c"]["version_counter"]
    assert (recs["a"]["version"], recs["c"]["version"]) == (0, 1)
    assert recs["c"]["requires_grad"] is False and recs["c"]["is_leaf"] is True
    assert recs["a"]["has_grad"] is True
    writes = find_events(doc, "write", op="add_")
    assert writes and all(recs["a"]["id"] not in written_ids(w) for w in writes)
    assert_program_printed(err, f"a: {a.tolist()}", f"c: {c.tolist()}")


def test_facts_data_shares_storage_not_version(runs):
    torch.manual_seed(0)
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    d = a.data
    e = a.detach()
    d.mul_(10)
    d.add_(1)
    e.add_(1)
    assert same_storage(a, d) and not shares_version_counter(a, d) and shares_version_counter(a, e)

    doc, err = doc_of(runs, "data_shares_storage_not_version.py")
    check_exit(doc, "data_shares_storage_not_version.py", None)
    recs = check_tensors(doc, {"a": a, "d": d, "e": e})
    assert recs["a"]["storage"] == recs["d"]["storage"] == recs["e"]["storage"]
    assert recs["a"]["version_counter"] == recs["e"]["version_counter"]
    assert recs["a"]["version_counter"] != recs["d"]["version_counter"]
    assert [recs[n]["version"] for n in "ade"] == [a._version, d._version, e._version] == [1, 2, 1]
    assert find_events(doc, "alias", op="data", tensor=recs["d"]["id"], base=recs["a"]["id"],
                       shares_version_counter=False)
    assert find_events(doc, "alias", op="detach", tensor=recs["e"]["id"], base=recs["a"]["id"],
                       shares_version_counter=True)
    via_d = find_events(doc, "write", alias="d")
    assert [(w["version_before"], w["version_after"]) for w in via_d] == [(0, 1), (1, 2)]
    assert_program_printed(err, f"a after writes via .data: {[11.0, 21.0, 31.0]}")


def test_facts_requires_grad_on_detached(runs):
    torch.manual_seed(0)
    a = torch.tensor(1.0, requires_grad=True)
    b = a.detach()
    b.requires_grad_()
    y = a ** 2
    z = b * 3
    y.backward()
    z.backward()
    assert (a.grad.item(), b.grad.item()) == (2.0, 3.0)

    doc, err = doc_of(runs, "requires_grad_on_detached.py")
    check_exit(doc, "requires_grad_on_detached.py", None)
    recs = check_tensors(doc, {"a": a, "b": b, "y": y, "z": z})
    assert recs["a"]["storage"] == recs["b"]["storage"]
    assert recs["b"]["requires_grad"] is True and recs["b"]["is_leaf"] is True
    assert recs["a"]["has_grad"] is True and recs["b"]["has_grad"] is True
    assert find_events(doc, "requires_grad", tensor=recs["b"]["id"], value=True)
    assert_program_printed(err, f"a.grad: {a.grad.item()}", f"b.grad: {b.grad.item()}")


def test_facts_no_grad_block(runs):
    torch.manual_seed(0)
    w = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        inside = w * 2
    outside = w * 2

    doc, err = doc_of(runs, "no_grad_block.py")
    check_exit(doc, "no_grad_block.py", None)
    recs = check_tensors(doc, {"w": w, "inside": inside, "outside": outside})
    assert recs["inside"]["requires_grad"] is False and recs["inside"]["grad_fn"] is None
    assert recs["outside"]["grad_fn"] == "MulBackward0"
    enter = find_events(doc, "grad_mode", mode="no_grad", action="enter")
    leave = find_events(doc, "grad_mode", mode="no_grad", action="exit")
    assert len(enter) == 1 and enter[0]["enabled"] is False
    assert len(leave) == 1 and leave[0]["enabled"] is True
    assert enter[0]["line"] == line_of(SNIPPETS_DIR / "no_grad_block.py", "with torch.no_grad():")


def test_facts_view_shares_storage(runs):
    torch.manual_seed(0)
    x = torch.arange(6.0)
    v = x.view(2, 3)
    v[1, 2] = 100.0
    after_first = x.tolist()
    x[0] = -1.0
    assert v._base is x and x._version == v._version == 2

    doc, err = doc_of(runs, "view_shares_storage.py")
    check_exit(doc, "view_shares_storage.py", None)
    recs = check_tensors(doc, {"x": x, "v": v})
    assert recs["v"]["view_of"] == recs["x"]["id"]
    assert recs["x"]["view_of"] is None
    assert find_events(doc, "alias", op="view", tensor=recs["v"]["id"], base=recs["x"]["id"])
    writes = find_events(doc, "write", op="setitem")
    assert len(writes) == 2
    for w in writes:
        assert ids(recs["x"], recs["v"]) <= written_ids(w)
    assert [(w["version_before"], w["version_after"]) for w in writes] == [(0, 1), (1, 2)]
    assert_program_printed(err, f"x after v[1, 2] = 100: {after_first}", f"v after x[0] = -1: {v.tolist()}")


def test_facts_reshape_view_or_copy(runs):
    torch.manual_seed(0)
    x = torch.arange(6.0).view(2, 3)
    r = x.reshape(3, 2)
    t = x.t()
    c = t.reshape(6)
    x[0, 0] = 42.0
    assert same_storage(x, r) and same_storage(x, t) and not same_storage(x, c)

    doc, err = doc_of(runs, "reshape_view_or_copy.py")
    check_exit(doc, "reshape_view_or_copy.py", None)
    recs = check_tensors(doc, {"x": x, "r": r, "t": t, "c": c})
    assert recs["r"]["storage"] == recs["x"]["storage"] != recs["c"]["storage"]
    assert recs["t"]["stride"] == [1, 3]
    check_view_of(doc, recs["r"], r, source=recs["x"])
    check_view_of(doc, recs["t"], t, source=recs["x"])
    check_view_of(doc, recs["c"], c)
    # torch copied here: the event must say copy, not an alias sharing the version counter
    assert not find_events(doc, "alias", tensor=recs["c"]["id"]), "reshape that copied is reported as an alias"
    assert find_events(doc, "copy", tensor=recs["c"]["id"])
    assert_program_printed(err, f"r[0, 0] after write to x: {r[0, 0].item()}",
                           f"c[0] after write to x: {c[0].item()}")


def test_facts_expand_stride_zero(runs):
    torch.manual_seed(0)
    row = torch.tensor([[1.0, 2.0, 3.0]])
    big = row.expand(4, -1)
    row[0, 1] = 20.0
    m = torch.tensor([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(RuntimeError) as info:
        m.expand(3, -1)
    assert 0 in big.stride() and same_storage(row, big)

    doc, err = doc_of(runs, "expand_stride_zero.py")
    check_exit(doc, "expand_stride_zero.py", None)   # the expand error is caught by the program
    recs = check_tensors(doc, {"row": row, "big": big, "m": m})
    assert 0 in recs["big"]["stride"]
    assert recs["big"]["storage"] == recs["row"]["storage"]
    assert recs["big"]["byte_range"] == [0, 12]
    assert recs["big"]["view_of"] == recs["row"]["id"]
    assert find_events(doc, "alias", op="expand", tensor=recs["big"]["id"], base=recs["row"]["id"])
    assert_program_printed(err, str(info.value).splitlines()[0])


def test_facts_as_strided_in_and_out_of_range(runs):
    snippet = "as_strided_in_and_out_of_range.py"
    torch.manual_seed(0)
    x = torch.arange(1, 10).view(3, 3)
    diag = x.as_strided((3,), (4,))
    win = x.as_strided((2, 2), (3, 1), 4)
    with pytest.raises(RuntimeError) as info:
        x.as_strided((5, 5), (0, 4))
    assert "out of bounds" in str(info.value)

    doc, err = doc_of(runs, snippet)
    check_exit(doc, snippet, info.value, "bad = x.as_strided((5, 5), (0, 4))")
    recs = check_tensors(doc, {"x": x, "diag": diag, "win": win}, alive=False)
    assert recs["diag"]["storage"] == recs["x"]["storage"] == recs["win"]["storage"]
    assert recs["win"]["storage_offset"] == 4 and recs["win"]["byte_range"] == [32, 72]
    check_view_of(doc, recs["diag"], diag, source=recs["x"])
    check_view_of(doc, recs["win"], win, source=recs["x"])
    assert not find_tensors(doc, "bad")
    assert find_events(doc, "alias", op="as_strided", tensor=recs["diag"]["id"])
    assert_program_printed(err, f"diag: {diag.tolist()}")


def test_facts_new_tensor_and_copy_across_dtypes(runs):
    snippet = "new_tensor_and_copy_across_dtypes.py"
    torch.manual_seed(0)
    src = torch.tensor([1.5, 2.5, 3.5], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n64 = src.new_tensor(src, dtype=torch.float64)
    dst = torch.zeros(3, dtype=torch.float64)
    before = dst.untyped_storage()._cdata
    dst.copy_(src)
    dst.sum().backward()
    assert dst.untyped_storage()._cdata == before and grad_fn_name(dst) == "CopyBackwards"

    doc, err = doc_of(runs, snippet)
    check_exit(doc, snippet, None)
    recs = check_tensors(doc, {"src": src, "n64": n64, "dst": dst})
    assert recs["n64"]["dtype"] == "float64" and recs["n64"]["requires_grad"] is False
    assert recs["dst"]["dtype"] == "float64"
    assert recs["dst"]["requires_grad"] is True and recs["dst"]["grad_fn"] == "CopyBackwards"
    assert recs["dst"]["is_leaf"] is False and recs["dst"]["version"] == 1
    assert len({recs[n]["storage"] for n in ("src", "n64", "dst")}) == 3
    for n, t in (("n64", n64), ("dst", dst)):
        check_view_of(doc, recs[n], t)
    # CONTRACT.md lists copy_ under `copy` events (tensor, source); a `write` event for the
    # same call is fine too, but some event must say where dst's data came from
    assert (find_events(doc, "copy", op="copy_", tensor=recs["dst"]["id"], source=recs["src"]["id"])
            or find_events(doc, "write", op="copy_", tensor=recs["dst"]["id"], source=recs["src"]["id"])), \
        "no event records src as the source of dst.copy_(src)"
    assert find_events(doc, "copy", op="new_tensor", tensor=recs["n64"]["id"], source=recs["src"]["id"])
    assert recs["src"]["has_grad"] is True
    assert_program_printed(err, f"src.grad: {src.grad.tolist()}")


def test_facts_id_vs_storage(runs):
    torch.manual_seed(0)
    a = torch.randn(2, 3, requires_grad=True)
    d = a.detach()
    v = a.view(6)
    c = a.clone()

    doc, err = doc_of(runs, "id_vs_storage.py")
    check_exit(doc, "id_vs_storage.py", None)
    recs = check_tensors(doc, {"a": a, "d": d, "v": v, "c": c})
    assert recs["a"]["storage"] == recs["d"]["storage"] == recs["v"]["storage"] != recs["c"]["storage"]
    assert len(ids(*recs.values())) == 4, "distinct Python objects must be distinct tensors"
    assert find_tensor(doc, "alias")["id"] == recs["a"]["id"], "`alias = a` is the same tensor"
    assert recs["v"]["view_of"] == recs["a"]["id"]
    check_view_of(doc, recs["c"], c)


def test_facts_inplace_after_detach_breaks_backward(runs):
    snippet = "inplace_after_detach_breaks_backward.py"
    torch.manual_seed(0)
    a = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
    out = a.sigmoid()
    alias = out.detach()
    alias.zero_()
    with pytest.raises(RuntimeError) as info:
        out.sum().backward()
    assert "modified by an inplace operation" in str(info.value)

    doc, err = doc_of(runs, snippet)
    check_exit(doc, snippet, info.value, "out.sum().backward()")
    recs = check_tensors(doc, {"a": a, "out": out, "alias": alias}, alive=False)
    assert recs["out"]["version"] == 1 and recs["a"]["has_grad"] is False
    for command in ("run", "explain"):
        doc, _ = doc_of(runs, snippet, command)
        check_inplace_diagnosis(doc, snippet, tensor_name="out", culprit_code="alias.zero_()",
                                alias="alias", node=type(out.grad_fn).__name__,
                                saved_code="out = a.sigmoid()", backward_code="out.sum().backward()")
        assert [e["ok"] for e in find_events(doc, "backward")] == [False]
    out_id = find_tensor(doc, "out")["id"]
    assert find_events(doc, "saved", tensor=out_id, version=0)  # saved events: explain only


def test_facts_inplace_after_detach_harmless(runs):
    snippet = "inplace_after_detach_harmless.py"
    torch.manual_seed(0)
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x ** 2
    y.detach().zero_()
    y.sum().backward()
    assert torch.equal(x.grad, 2 * x.detach())

    doc, err = doc_of(runs, snippet)
    check_exit(doc, snippet, None)
    recs = check_tensors(doc, {"x": x, "y": y})
    assert (recs["x"]["version"], recs["y"]["version"]) == (0, 1)
    assert recs["x"]["has_grad"] is True
    assert doc["diagnosis"] is None
    assert not [h for h in doc["hazards"] if h["kind"] == "silent-saved-tensor-write"]
    writes = find_events(doc, "write", op="zero_")
    assert len(writes) == 1 and writes[0]["alias"] == "y.detach()"
    assert recs["y"]["id"] in written_ids(writes[0])
    assert [e["ok"] for e in find_events(doc, "backward")] == [True]
    assert_program_printed(err, f"x.grad: {x.grad.tolist()}")


def test_facts_data_write_silent_wrong_grad(runs):
    snippet = "data_write_silent_wrong_grad.py"
    torch.manual_seed(0)
    x = torch.tensor(3.0, requires_grad=True)
    y = x.exp()
    y.data.zero_()
    y.backward()   # no error: the write was invisible to the version check
    assert x.grad.item() == 0.0 and y._version == 0
    assert math.isclose(torch.exp(torch.tensor(3.0)).item(), 20.0855, rel_tol=1e-4)

    doc, err = doc_of(runs, snippet)
    check_exit(doc, snippet, None)
    recs = check_tensors(doc, {"x": x, "y": y})
    assert recs["y"]["version"] == 0 and recs["x"]["has_grad"] is True
    assert doc["hazards"] == []  # run registers no saved-tensor hooks: silent writes are explain's
    edoc, _ = doc_of(runs, snippet, "explain")
    hazards = [h for h in edoc["hazards"] if h["kind"] == "silent-saved-tensor-write"]
    assert len(hazards) == 1, f"hazards: {[h['kind'] for h in doc['hazards']]}"
    h = hazards[0]
    assert h["culprit"]["line"] == line_of(SNIPPETS_DIR / snippet, "y.data.zero_()")
    assert h["saved_by"]["node"] == type(y.grad_fn).__name__
    assert "y" in h["tensor"]["names"]
    writes = [w for w in find_events(doc, "write", op="zero_") if recs["y"]["id"] in written_ids(w)]
    assert len(writes) == 1 and writes[0]["alias"] == "y.data"
    assert_program_printed(err, f"x.grad: {x.grad.item()}")


def test_facts_view_write_before_matmul_backward(runs):
    snippet = "view_write_before_matmul_backward.py"
    torch.manual_seed(0)
    x = torch.tensor([1.0, 1.0, 1.0], requires_grad=True)
    y = torch.tensor([2.0, 4.0, 6.0], requires_grad=True).view(-1, 1)
    z = torch.matmul(x, y)
    node = saved_by_node(z, y)
    tmp = y.detach()
    tmp.mul_(2)
    with pytest.raises(RuntimeError) as info:
        z.backward()
    assert "output 0 of AsStrided" in str(info.value)

    doc, err = doc_of(runs, snippet)
    check_exit(doc, snippet, info.value, "z.backward()")
    recs = check_tensors(doc, {"x": x, "y": y, "z": z, "tmp": tmp}, alive=False)
    assert recs["y"]["storage"] == recs["tmp"]["storage"]
    assert recs["y"]["version_counter"] == recs["tmp"]["version_counter"]
    # the in-place write through the alias regenerates the view's grad_fn: torch itself now
    # says AsStridedBackward0 (checked against the real tensor in check_tensors)
    assert grad_fn_name(y) == "AsStridedBackward0"
    base = tensor_by_id(doc, recs["y"]["view_of"])   # the unnamed leaf behind the view
    check_tensor(doc, base, y._base, "y._base", alive=False)
    assert base["storage"] == recs["y"]["storage"]
    for command in ("run", "explain"):
        check_inplace_diagnosis(doc_of(runs, snippet, command)[0], snippet, tensor_name="y",
                                culprit_code="tmp.mul_(2)", alias="tmp", node=node,
                                saved_code="z = torch.matmul(x, y)", backward_code="z.backward()")


def test_facts_linear_parameters(runs):
    snippet = "linear_parameters.py"
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    inp = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    out = layer(inp)
    loss = out.sum()
    loss.backward()
    assert layer.weight.grad.tolist() == [[5.0, 7.0, 9.0]] * 2 and layer.bias.grad.tolist() == [2.0, 2.0]

    doc, err = doc_of(runs, snippet)
    check_exit(doc, snippet, None)
    recs = check_tensors(doc, {"weight": layer.weight, "bias": layer.bias, "inp": inp,
                               "out": out, "loss": loss})
    for p in ("weight", "bias"):
        assert recs[p]["requires_grad"] is True and recs[p]["is_leaf"] is True
        assert recs[p]["has_grad"] is True and recs[p]["grad_fn"] is None
    assert recs["inp"]["requires_grad"] is False and recs["inp"]["has_grad"] is False
    assert recs["out"]["has_grad"] is None and recs["out"]["grad_fn"] == grad_fn_name(out)
    assert [e["ok"] for e in find_events(doc, "backward")] == [True]
    assert_program_printed(err, f"weight.grad: {layer.weight.grad.tolist()}",
                           f"bias.grad: {layer.bias.grad.tolist()}")


def test_every_snippet_has_a_facts_test():
    have = {name[len("test_facts_"):] + ".py" for name in globals() if name.startswith("test_facts_")}
    assert have == set(SNIPPETS)
