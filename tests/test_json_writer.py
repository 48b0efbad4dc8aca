"""The streamed `-o report.json` writer (see NOTE [Fast JSON writer] in render/json.py) writes the
very bytes the standard library's ``json.dumps(doc, indent=2, default=str)`` would."""

from __future__ import annotations

import io
import json
import textwrap

from tensorscope.render import json as json_form

from tests._cli import run_cli


class _Str(str):
    pass


class _Int(int):
    pass


class _Float(float):
    pass


class _Opaque:
    def __str__(self):
        return "opaque \u00e9"


def _same_as_stdlib(doc) -> None:
    out = io.StringIO()
    json_form.write(doc, out)
    assert out.getvalue() == json.dumps(doc, indent=2, default=str) + "\n"


def test_every_kind_of_value_as_the_stdlib_writes_it():
    _same_as_stdlib({
        "numbers": [0, -1, 10 ** 30, 1.5, -0.0, 1e300, 1e-300, float("nan"), float("inf"), float("-inf")],
        "constants": [True, False, None],
        "strings": ["", "plain", "\u00e9\u2028\n\t\"\\", "\U0001f600", "\x00"],
        "empty": [[], {}, (), ""],
        "nested": {"a": [[{"b": [(1, 2), []]}]], "c": {"d": {}}},
        "keys": {1: "int", 2.5: "float", None: "none", True: "true", False: "false", "s": "str"},
        "subclasses": [_Str("s"), _Int(3), _Float(2.5), {"k": _Str("v"), "i": _Int(-7)}],
        "default_str": [_Opaque(), {"x": _Opaque()}, [[_Opaque()]]],
        "top_level_scalar": 1,
    })
    for doc in ([], {}, [1], {"a": 1}, "x", None, 3.25):
        _same_as_stdlib(doc)


def test_a_long_list_is_written_in_pieces_and_stays_identical():
    _same_as_stdlib({"tensors": [{"id": f"t{i}", "shape": [i, 2], "names": [f"n{i}"], "v": None}
                                 for i in range(30_000)]})


def test_a_real_report_file_has_the_stdlib_layout(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""
        import torch
        w = torch.randn(3, 4, requires_grad=True)
        v = w.detach().view(12)
        v.mul_(2.0)
        loss = (w * 2).sum()
        loss.backward()
    """))
    out = tmp_path / "r.json"
    rc, _, err, _ = run_cli("run", "-o", str(out), str(prog), cwd=tmp_path)
    assert rc == 0, err
    text = out.read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), indent=2) + "\n"
