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
    text = render(DOC, "text", width=100)
    assert "140000000" not in text and not re.search(r"0x[0-9a-f]{6,}", text)
    assert "s1  cpu  24 bytes  shared by 2 tensors" in text
    # x covers the whole storage, row the second half
    assert re.search(r"t1 \[#{40}\]", text)
    assert re.search(r"t2 \[\.{20}#{20}\]", text)
    assert "alias row (t2) = getitem of x (t1)" in text
