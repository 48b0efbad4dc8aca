"""Renderers over hand-built report documents (no torch, no run needed)."""

from __future__ import annotations

import json
import re

from tensorscope.render import Form, render

DOC = {
    "schema_version": 1, "tensorscope_version": "0", "torch_version": "2.13.0", "command": "run",
    "program": {"path": "p.py", "argv": ["p.py"], "exit_status": 0, "exception": None},
    "device_mode": "auto",
    "tensors": [
        {"id": "t1", "names": ["x"], "alive": True, "shape": [2, 3], "stride": [3, 1], "dtype": "float32",
         "device": "cpu", "storage": "s1", "storage_offset": 0, "data_ptr": 140000000, "nbytes": 24,
         "byte_range": [0, 24], "view_of": None, "version": 1, "version_counter": "v1", "requires_grad": True,
         "is_leaf": True, "grad_fn": None, "has_grad": False, "created": None},
        {"id": "t2", "names": ["row"], "alive": True, "shape": [3], "stride": [1], "dtype": "float32",
         "device": "cpu", "storage": "s1", "storage_offset": 3, "data_ptr": 140000012, "nbytes": 12,
         "byte_range": [12, 24], "view_of": "t1", "version": 1, "version_counter": "v1", "requires_grad": True,
         "is_leaf": False, "grad_fn": "SelectBackward0", "has_grad": None, "created": None},
    ],
    "storages": [{"id": "s1", "device": "cpu", "nbytes": 24, "data_ptr": 140000000, "tensors": ["t1", "t2"]}],
    "version_counters": [{"id": "v1", "tensors": ["t1", "t2"]}],
    "events": [{"seq": 1, "kind": "alias", "file": "p.py", "line": 3, "code": "row = x[1]", "op": "getitem",
                "tensor": "t2", "base": "t1", "shares_version_counter": True}],
    "events_summary": {"recorded": 1, "aggregated": 0, "per_site_limit": 20, "max_events": 20000, "sites": []},
    "diagnosis": None, "hazards": [], "notes": [],
}


def test_every_form_renders():
    for form in Form:
        assert render(DOC, form.value)


def test_json_round_trips():
    assert json.loads(render(DOC, "json")) == DOC


def test_text_has_no_raw_addresses_and_draws_the_storage_map():
    assert "140000000" not in render(DOC, "text", width=100)
    text = render(DOC, "text", width=100, full=True)
    assert "140000000" not in text and not re.search(r"0x[0-9a-f]{6,}", text)
    assert "s1  cpu  24 bytes  shared by 2 tensors" in text
    # x covers the whole storage, row the second half
    assert re.search(r"t1 \[#{40}\]", text)
    assert re.search(r"t2 \[\.{20}#{20}\]", text)
    assert "alias row (t2) = getitem of x (t1)" in text


# --- the summary report -----------------------------------------------------------------------

import copy  # noqa: E402

import pytest  # noqa: E402
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402
from rich.text import Text  # noqa: E402

from tensorscope.render import text as text_form  # noqa: E402


def _param(tid, names, version=3, has_grad=True, role="parameter"):
    return {"id": tid, "names": names, "alive": True, "shape": [4], "stride": [1], "dtype": "float32",
            "device": "cpu", "storage": "s" + tid[1:], "storage_offset": 0, "data_ptr": 1, "nbytes": 16,
            "byte_range": [0, 16], "view_of": None, "version": version, "version_counter": "v" + tid[1:],
            "requires_grad": role == "parameter", "is_leaf": True, "grad_fn": None,
            "has_grad": has_grad if role == "parameter" else None, "created": None, "role": role}


def model_doc(blocks=3):
    """A model reachable as `model` and `raw_model`, blocks.N.attn with 2 parameters, AdamW state."""
    doc = copy.deepcopy(DOC)
    tensors, params = [], []
    n = 10
    for b in range(blocks):
        for p in ("weight", "bias"):
            n += 1
            tensors.append(_param(f"t{n}", [f"model.blocks.{b}.attn.lin.{p}", f"raw_model.blocks.{b}.attn.lin.{p}"]))
            params.append(f"t{n}")
    n += 1
    tensors.append(_param(f"t{n}", ["model.wte.weight", "model.head.weight", "raw_model.wte.weight",
                                    "raw_model.head.weight"]))
    params.append(f"t{n}")
    for pid in list(params):
        pname = next(t for t in tensors if t["id"] == pid)["names"][0]
        for key in ("exp_avg", "exp_avg_sq"):
            n += 1
            tensors.append(_param(f"t{n}", [f"opt.state[{pname}].{key}"], role="optimizer_state"))
    doc["tensors"] += tensors
    doc["optimizers"] = [{"name": "opt", "type": "AdamW", "parameters": params, "state_keys": ["exp_avg", "exp_avg_sq"]}]
    return doc


def test_summary_starts_with_the_verdict_and_headline():
    lines = render(model_doc(), "text", width=100).splitlines()
    assert lines[0].startswith("tensorscope run p.py")
    assert lines[1] == "clean: no backward call; hazards: none"
    assert "7 parameters" in lines[2] and "14 optimizer state" in lines[2] and "1 storage shared" in lines[2]


def test_summary_groups_parameters_per_module_and_folds_indices():
    out = render(model_doc(), "text", width=200)
    assert "raw_model is model: the same tensors under both names" in out
    assert ("model.blocks.[0-2].attn (3 modules, each): 2 parameters (leaves, .grad set, version 3, in opt, "
            "with state)") in out
    assert "model.wte: 1 parameter" in out and "model.head.weight is model.wte.weight" in out
    assert "opt (AdamW): 7 parameters, state for 7 of them: exp_avg, exp_avg_sq (14 tensors" in out
    assert "raw_model.blocks" not in out  # one tensor under two names is shown once


def test_summary_shows_shared_storages_with_views_and_version_counters():
    out = render(DOC, "text", width=100)
    assert "s1  cpu  24 bytes  2 tensors" in out
    assert re.search(r"t1 \[#{16}\] x  version 1, counter v1 \(shared\)", out)
    assert re.search(r"t2 \[\.{8}#{8}\] row  view of x, version 1, counter v1 \(shared\)", out)
    assert "p.py:3  alias getitem  row = x[1]" in out


def test_a_parameter_alone_on_its_storage_gets_no_storage_block():
    doc = model_doc()
    doc["tensors"] = [t for t in doc["tensors"] if t["id"] not in ("t1", "t2")]
    doc["storages"] = []
    assert "Aliasing" not in render(doc, "text", width=100)


def test_timeline_folds_per_line_with_counts_and_library_writes():
    doc = copy.deepcopy(DOC)
    doc["events"] = [
        {"seq": i, "kind": "write", "file": "m.py", "line": 7, "code": "self.fc = nn.Linear(4, 4)", "op": "uniform_",
         "tensor": "t1", "alias": None, "library": "torch/nn/init.py:kaiming_uniform_", "version_before": 0,
         "version_after": 1} for i in range(1, 21)] + [
        {"seq": 30 + i, "kind": "saved", "file": "m.py", "line": 9, "code": "y = x.sigmoid()", "tensor": "t1",
         "version": 0} for i in range(20)]
    doc["events_summary"]["sites"] = [{"kind": "saved", "file": "m.py", "line": 9, "code": "y = x.sigmoid()",
                                       "count": 40}]
    out = render(doc, "text", width=100)
    assert "m.py:7  write (inside torch/nn/init.py) x20  self.fc = nn.Linear(4, 4)" in out
    assert "m.py:9  saved for backward x40  y = x.sigmoid()" in out
    full = render(doc, "text", width=100, full=True)
    assert full.count("saved for backward") == 20


def test_full_tensor_and_line_views():
    assert "Storage map" in render(DOC, "text", width=100, full=True)
    one = render(DOC, "text", width=100, tensor="row")
    assert "t2 row" in one and "view of t1 x" in one and "alias row (t2) = getitem of x (t1)" in one
    assert "did you mean: row" in render(DOC, "text", width=100, tensor="rwo")
    at = render(DOC, "text", width=100, line="p.py:3")
    assert "row = x[1]" in at and "alias row (t2) = getitem of x (t1)" in at
    assert "nothing was recorded at p.py:4" in render(DOC, "text", width=100, line="p.py:4")


def test_a_clean_explain_is_one_line_unless_the_report_is_asked_for():
    doc = copy.deepcopy(DOC)
    doc["command"] = "explain"
    doc["events"].append({"seq": 2, "kind": "backward", "file": "p.py", "line": 5, "code": "y.backward()",
                          "op": "backward", "roots": ["t2"], "leaves_with_grad": ["t1", "t1"], "ok": True})
    assert render(doc, "text", width=100) == "clean: 1 backward call, all succeeded; hazards: none\n"
    assert "Aliasing" in render(doc, "text", width=100, report=True)
    # one backward event never lists the same leaves twice
    full = render(doc, "text", width=300, full=True)
    assert "leaves with .grad: x (t1) " in full and "x (t1), x (t1)" not in full


# --- user text is text, never markup ------------------------------------------------------------

def test_source_text_that_looks_like_markup_is_shown_as_written():
    doc = copy.deepcopy(DOC)
    doc["events"][0]["code"] = 'x[k] = 1.0; s = "[/x]"; nn.Sequential(*[m])  # [bold red]'
    doc["tensors"][1]["names"] = ["losses[k]", "[/]"]
    doc["notes"] = ["[link=x]note[/link]"]
    for opts in ({}, {"line": "p.py:3"}, {"tensor": "[/]"}):
        out = render(doc, "text", width=300, **opts)
        assert 'x[k] = 1.0; s = "[/x]"; nn.Sequential(*[m])' in out, opts
    assert 'x[k] = 1.0; s = "[/x]";' in render(doc, "text", width=300, full=True)  # a folded table cell
    out = render(doc, "text", width=300)
    assert "losses[k], [/]" in out and "note: [link=x]note[/link]" in out


hostile = st.text(alphabet=st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), max_size=300)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(code=hostile, name=hostile.filter(lambda s: s.strip()), long=st.booleans())
def test_hostile_source_lines_and_names_render(code, name, long):
    if long:
        code = code + "y" * 3000
    doc = copy.deepcopy(DOC)
    doc["events"][0]["code"] = code
    doc["tensors"][0]["names"] = [name]
    doc["notes"] = [code]
    def squash(s):  # rich drops control codes and expands tabs by column: compare without whitespace
        return "".join(Text(s).plain.split())

    for opts in ({}, {"full": True}, {"line": "p.py:3"}, {"tensor": name}):
        out = squash(render(doc, "text", width=5000, **opts))
        if opts == {"full": True}:
            continue  # the full dump folds names and code into narrow table columns: no crash is the check
        assert squash(code) in out, opts
        if opts != {"line": "p.py:3"}:
            assert squash(name) in out, opts
