"""Copy methods that return their input itself are no copies (issue 10, item 10).

`x.to("cpu")` on a CPU tensor, `x.contiguous()` on a contiguous one, `x.float()` on a float32 ...
return `x`: the report records nothing for them (no "copy ... (new storage)" event, no new tensor).
Which calls return `x` itself is asked of torch in this process, not of tensorscope.
"""

from __future__ import annotations

import json

import torch

from _cli import REPO, load_report, run_cli, validate_against_schema

# (source line, the call evaluated on `x` here to ask torch whether it returns x itself)
CALLS = [
    ('y1 = x.to("cpu")', lambda x: x.to("cpu")),
    ("y2 = x.contiguous()", lambda x: x.contiguous()),
    ("y3 = x.float()", lambda x: x.float()),
    ("y4 = x.to(x.dtype)", lambda x: x.to(x.dtype)),
    ("y5 = x.type(x.type())", lambda x: x.type(x.type())),
    ("y6 = x.cpu()", lambda x: x.cpu()),
    ("y7 = torch.as_tensor(x)", lambda x: torch.as_tensor(x)),
    ("y8 = x.to(x)", lambda x: x.to(x)),
    # real copies, as a control
    ("z1 = x.double()", lambda x: x.double()),
    ('z2 = x.to("cpu", copy=True)', lambda x: x.to("cpu", copy=True)),
    ("z3 = x.t().contiguous()", lambda x: x.t().contiguous()),
]


def test_noop_copies_record_nothing(tmp_path):
    x = torch.randn(2, 3)
    same = {code: fn(x) is x for code, fn in CALLS}
    assert any(same.values()) and not all(same.values())
    prog = tmp_path / "noop.py"
    lines = ["import torch", "x = torch.randn(2, 3)", *[c for c, _ in CALLS],
             "print(y1 is x, y1.data_ptr() == x.data_ptr())"]
    prog.write_text("\n".join(lines) + "\n")
    report = tmp_path / "r.json"
    rc, out, err, _ = run_cli("run", "-o", str(report), str(prog), cwd=REPO)
    assert rc == 0 and out == "True True\n", (rc, out, err[-500:])
    doc = load_report(report.read_text())
    assert validate_against_schema(doc)
    events_by_line: dict = {}
    for e in doc["events"]:
        events_by_line.setdefault(e["line"], []).append(e)
    x_id = next(t["id"] for t in doc["tensors"] if "x" in t["names"])
    for i, (code, _) in enumerate(CALLS, start=3):
        name = code.split(" = ")[0]
        tensor = next(t for t in doc["tensors"] if name in t["names"])
        if same[code]:
            assert events_by_line.get(i, []) == [], (code, events_by_line.get(i))
            assert tensor["id"] == x_id, (code, tensor)
        else:
            kinds = [e["kind"] for e in events_by_line.get(i, [])]
            assert "copy" in kinds, (code, events_by_line.get(i))
            assert tensor["id"] != x_id and tensor["storage"] != doc["tensors"][0]["storage"], code
