"""The `-o report.json` / `--json` writer (see NOTE [JSON layout: one record per line] in
render/json.py): ``json.loads`` gives the document back, values are written as the standard library
writes them, each element of a top-level array sits on one line, everything else keeps indent=2."""

from __future__ import annotations

import io
import json
import math
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


def _written(doc) -> str:
    out = io.StringIO()
    json_form.write(doc, out)
    text = out.getvalue()
    assert json_form.render(doc) == text
    return text


def _same_values(a, b) -> bool:
    """Equal, NaN included (json.loads gives a new NaN, and NaN != NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same_values(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_values(x, y) for x, y in zip(a, b))
    return a == b


def _check_layout(doc: dict, text: str) -> None:
    """The layout of the NOTE, checked against the standard library's own encodings of each part."""
    # the document, as json.dumps would give it back (tuples as lists, keys as strings, default=str)
    expected = json.loads(json.dumps(doc, default=str))
    assert _same_values(json.loads(text), expected)
    lines = text.split("\n")
    assert lines[0] == "{" and lines[-2] == "}" and lines[-1] == ""
    body = "\n".join(lines[1:-2])
    parts = []
    for k, v in doc.items():
        key = json.dumps({k: 0})[1:-4]
        if isinstance(v, (list, tuple)) and v:
            items = ",\n".join("    " + json.dumps(x, default=str) for x in v)
            parts.append(f"  {key}: [\n{items}\n  ]")
        else:
            parts.append(f"  {key}: " + json.dumps(v, indent=2, default=str).replace("\n", "\n  "))
    assert body == ",\n".join(parts)


def test_every_kind_of_value_as_the_stdlib_writes_it():
    doc = {
        "numbers": [0, -1, 10 ** 30, 1.5, -0.0, 1e300, 1e-300, float("nan"), float("inf"), float("-inf")],
        "constants": [True, False, None],
        "strings": ["", "plain", "\u00e9\u2028\n\t\"\\", "\U0001f600", "\x00"],
        "empty": [[], {}, (), ""],
        "empty_list": [],
        "empty_dict": {},
        "nested": {"a": [[{"b": [(1, 2), []]}]], "c": {"d": {}}},
        "keys": {1: "int", 2.5: "float", None: "none", True: "true", False: "false", "s": "str"},
        "subclasses": [_Str("s"), _Int(3), _Float(2.5), {"k": _Str("v"), "i": _Int(-7)}],
        "default_str": [_Opaque(), {"x": _Opaque()}, [[_Opaque()]]],
        "records": [{"id": "t1", "shape": [3, 4], "names": ["x", "\u00e9"], "grad_fn": None}],
        "top_level_scalar": 1,
        7: "a non-string top-level key",
    }
    text = _written(doc)
    _check_layout(doc, text)
    assert '\n    {"id": "t1", "shape": [3, 4], "names": ["x", "\\u00e9"], "grad_fn": null}\n' in text
    assert "\n  \"nested\": {\n    \"a\": [\n" in text  # not a top-level array: indent=2
    for other in ([], {}, [1], "x", None, 3.25, [{"a": 1}]):  # not a dict: json.dumps(indent=2)
        assert _written(other) == json.dumps(other, indent=2, default=str) + "\n"


def test_a_long_list_is_written_in_pieces_one_record_per_line():
    doc = {"tensors": [{"id": f"t{i}", "shape": [i, 2], "names": [f"n{i}"], "v": None} for i in range(30_000)],
           "after": {"x": 1}}

    class Counting(io.StringIO):
        writes = 0

        def write(self, s):
            Counting.writes += 1
            return super().write(s)

    out = Counting()
    json_form.write(doc, out)
    text = out.getvalue()
    assert Counting.writes > 10  # streamed, not one whole-document string
    _check_layout(doc, text)
    assert len(text.splitlines()) == 30_000 + 7  # {, "tensors": [, ], "after": {, "x": 1, }, }


def test_a_real_report_file_has_the_layout(tmp_path):
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
    doc = json.loads(text)
    _check_layout(doc, text)
    assert doc["form"] == "compact"  # the default: one row per tensor
    tensor_lines = [line for line in text.splitlines() if line.startswith('    ["t')]
    assert len(tensor_lines) == len(doc["tensors"]) >= 2
    # --json --full on stdout is the same layout, one record per tensor
    rc, stdout, err, _ = run_cli("run", "--json", "--full", str(prog), cwd=tmp_path)
    assert rc == 0, err
    _check_layout(json.loads(stdout), stdout)
    assert json.loads(stdout)["form"] == "full"
    assert sum(line.startswith('    {"id": "t') for line in stdout.splitlines()) == len(doc["tensors"])


_SHARED = """
import torch
w = torch.randn(3, 4, requires_grad=True)
v = w.detach().view(12)
v.mul_(2.0)
row = torch.zeros(100, 10)[3]
alone = torch.ones(5, dtype=torch.float64)
loss = (w * 2).sum()
loss.backward()
"""


def test_the_compact_form_holds_every_fact_of_the_full_form(tmp_path):
    """What the compact form leaves out is what expand() rebuilds: the same document as --full, and
    the storages and counters it lists are the shared or larger ones, as torch says they are."""
    import torch

    from tensorscope.compact import ROW, expand
    from tests._cli import validate_against_schema

    prog = tmp_path / "prog.py"
    prog.write_text(_SHARED)
    rc, _, err, _ = run_cli("run", "-o", str(tmp_path / "c.json"), str(prog), cwd=tmp_path)
    assert rc == 0, err
    compact = json.loads((tmp_path / "c.json").read_text())
    assert compact["form"] == "compact" and validate_against_schema(compact)
    # the same saved facts in the full form, with no second run: explain REPORT.json --full
    rc, stdout, err, _ = run_cli("explain", "--json", "--full", "c.json", cwd=tmp_path)
    assert rc == 0, err
    full = json.loads(stdout)
    assert full["form"] == "full" and full["tensor_kinds"] == [] and validate_against_schema(full)
    assert expand(compact) == full

    rows = {r[0]: dict(zip(ROW, r)) for r in compact["tensors"]}
    by_name = {n: t for t in full["tensors"] for n in t["names"]}
    w, v, row, alone = (by_name[n] for n in ("w", "v", "row", "alone"))
    # torch: w and v share one storage and one version counter; row's storage is 100x its bytes
    w_t = torch.randn(3, 4, requires_grad=True)
    v_t = w_t.detach().view(12)
    row_t = torch.zeros(100, 10)[3]
    assert v_t.untyped_storage().data_ptr() == w_t.untyped_storage().data_ptr()
    listed = {s["id"]: s for s in compact["storages"]}
    assert {w["id"], v["id"]} <= set(listed[w["storage"]]["tensors"])
    (shared,) = [c["tensors"] for c in compact["version_counters"] if w["id"] in c["tensors"]]
    assert {w["id"], v["id"]} <= set(shared)
    assert listed[row["storage"]]["nbytes"] == row_t.untyped_storage().nbytes()
    assert row["nbytes"] == row_t.numel() * row_t.element_size() < listed[row["storage"]]["nbytes"]
    # a tensor alone in its storage: not listed, and rebuilt with the bytes torch gives it
    assert alone["storage"] not in listed and rows[alone["id"]]["storage"] == alone["storage"]
    (s,) = [s for s in full["storages"] if s["id"] == alone["storage"]]
    assert s["nbytes"] == torch.ones(5, dtype=torch.float64).untyped_storage().nbytes() and s["tensors"] == [alone["id"]]
    assert not [c for c in compact["version_counters"] if alone["id"] in c["tensors"]]
    # every tensor's kind holds the rest of its record
    for t in full["tensors"]:
        kind = compact["tensor_kinds"][rows[t["id"]]["kind"]]
        assert {**kind, **{k: rows[t["id"]][k] for k in ROW[:-1]}} == t


def _full_doc() -> dict:
    """A full document by hand: a tensor and its view on one storage (listed, a shared version
    counter), a tensor alone on its storage (implied in the compact form), a dead temporary."""
    from tensorscope.report import memory_groups, skeleton

    def tensor(tid, names, alive, storage, counter, ptr, nbytes, view_of=None):
        return {"id": tid, "names": names, "alive": alive, "shape": [nbytes // 4], "stride": [1], "dtype": "float32",
                "device": "cpu", "storage": storage, "storage_offset": 0, "data_ptr": ptr, "nbytes": nbytes,
                "byte_range": [0, nbytes], "version": 0, "requires_grad": False, "is_leaf": True, "grad_fn": None,
                "view_of": view_of, "version_counter": counter, "has_grad": None, "role": None, "created": None}

    tensors = [tensor("t1", ["w"], True, "s1", "v1", 1000, 48), tensor("t2", ["v"], True, "s1", "v1", 1000, 48, "t1"),
               tensor("t3", ["b"], True, "s2", "v2", 5000, 16), tensor("t4", [], False, "s3", "v3", 7000, 8)]
    storages = [{"id": "s1", "device": "cpu", "nbytes": 48, "data_ptr": 1000, "tensors": ["t1", "t2"]},
                {"id": "s2", "device": "cpu", "nbytes": 16, "data_ptr": 5000, "tensors": ["t3"]}]
    memory_groups(storages)
    doc = skeleton(command="run", program=None, torch_version=None, device_mode=None)
    doc.update(tensors=tensors, storages=storages,
               version_counters=[{"id": "v1", "tensors": ["t1", "t2"]}, {"id": "v2", "tensors": ["t3"]},
                                 {"id": "v3", "tensors": ["t4"]}])
    return doc


def test_the_compact_form_is_written_only_where_it_expands_back_exactly():
    """compact() checks record by record (NOTE [Checking the compact form without expanding it]):
    a document it folds expands back to the same tables, and one it cannot fold (a storage or a
    counter the rules do not give back) is written whole."""
    import copy

    from tensorscope.compact import compact, expand

    def tables(d):
        return d["tensors"], d["storages"], d["version_counters"]

    doc = _full_doc()
    out = compact(doc)
    assert out["form"] == "compact" and len(out["storages"]) == 1 and len(out["version_counters"]) == 1
    assert tables(expand(out)) == tables(doc)

    def changed(edit):
        d = copy.deepcopy(doc)
        edit(d)
        return d

    unfoldable = [
        changed(lambda d: d["storages"][1].update(memory="m1")),  # an implied storage in another memory group
        changed(lambda d: d["storages"][1].update(extra=1)),  # a storage key expand does not make
        changed(lambda d: d["storages"].pop(1)),  # a live tensor's storage not listed: expand would add it
        changed(lambda d: d["version_counters"].pop(2)),  # a counter expand would add
        changed(lambda d: d["version_counters"][0]["tensors"].reverse()),  # not in the tensors' order
        changed(lambda d: d["storages"].reverse()),  # not in id order
    ]
    for d in unfoldable:
        assert compact(d) is d
    # and one that folds after an edit the rules do give back: a dead tensor's storage is not listed
    d = changed(lambda d: d["tensors"][3].update(storage="s9"))
    assert compact(d)["form"] == "compact" and tables(expand(compact(d))) == tables(d)


def test_the_document_is_built_as_rows_that_fold_and_expand_like_the_full_form():
    """report.build writes the compact form as it goes (NOTE [The document's tensors as rows]): the rows,
    kinds, storages and counters are what compact() folds from the full records, and expand() gives
    those full records back. A hand-built recording: a tensor and its view on one storage (shared counter),
    two parameters alike but for their own fields (one kind), one alone on a larger storage, a dead one."""
    from tensorscope import report
    from tensorscope.compact import compact, expand
    from tensorscope.recording import Recording, Snapshot, Tensor

    def t(tid, storage, ptr, nbytes, storage_nbytes=None, **kw):
        return Tensor(id=tid, shape=(nbytes // 4,), stride=(1,), dtype="float32", device="cpu", storage=storage,
                      storage_offset=0, data_ptr=ptr, nbytes=nbytes, byte_range=(0, nbytes), version=0,
                      requires_grad=False, is_leaf=True, grad_fn=None, storage_nbytes=storage_nbytes or nbytes,
                      storage_ptr=ptr, **kw)

    rec = Recording(
        tensors=(t("t1", "s1", 1000, 48), t("t2", "s1", 1000, 48, is_view=True, view_of="t1"),
                 t("t3", "s2", 2000, 16), t("t4", "s3", 3000, 16), t("t5", "s4", 4000, 8, storage_nbytes=400),
                 t("t6", "s5", 5000, 8)),
        names={"t6": ("tmp",)},
        created={"t5": {"file": "/nowhere/p.py", "line": 3, "how": "zeros", "source": None}},
        snapshot=Snapshot(named={"t1": ("w",), "t2": ("v",), "t3": ("a",), "t4": ("b",), "t5": ("row",)},
                          alive=("t1", "t2", "t3", "t4", "t5"), view_of={"t2": "t1"},
                          counters={"t1": "v1", "t2": "v1", "t3": "v2", "t4": "v3", "t5": "v4"},
                          roles={"t3": "parameter", "t4": "parameter"}))
    doc = report.build(rec, command="run", program={"path": "p.py"}, torch_version="2.13.0", device_mode="auto")
    assert doc["form"] == "compact"
    full = expand(doc)
    by_id = {r["id"]: r for r in full["tensors"]}
    assert [r["id"] for r in full["tensors"]] == ["t1", "t2", "t3", "t4", "t5", "t6"]
    assert by_id["t2"] == {"id": "t2", "names": ["v"], "alive": True, "shape": [12], "stride": [1], "dtype": "float32",
                           "device": "cpu", "storage": "s1", "storage_offset": 0, "data_ptr": 1000, "nbytes": 48,
                           "byte_range": [0, 48], "version": 0, "requires_grad": False, "is_leaf": True,
                           "grad_fn": None, "view_of": "t1", "version_counter": "v1", "has_grad": None, "role": None,
                           "created": None}
    assert by_id["t6"]["alive"] is False and by_id["t6"]["names"] == ["tmp"]
    assert by_id["t5"]["created"] == {"file": "/nowhere/p.py", "line": 3, "code": "", "how": "zeros"}
    assert [(s["id"], s["tensors"], s["nbytes"]) for s in full["storages"]] == [
        ("s1", ["t1", "t2"], 48), ("s2", ["t3"], 16), ("s3", ["t4"], 16), ("s4", ["t5"], 400)]
    assert [s["memory"] for s in full["storages"]] == ["m1", "m2", "m3", "m4"]
    assert full["version_counters"] == [{"id": "v1", "tensors": ["t1", "t2"]}, {"id": "v2", "tensors": ["t3"]},
                                        {"id": "v3", "tensors": ["t4"]}, {"id": "v4", "tensors": ["t5"]}]
    # only the shared storage and the larger one are listed, only the shared counter; the two parameters
    # are one kind
    assert [s["id"] for s in doc["storages"]] == ["s1", "s4"] and len(doc["version_counters"]) == 1
    # a view's base is its row's (schema_version 4): the view t2 is the same kind as its base t1
    assert [row[5] for row in doc["tensors"]] == [None, "t1", None, None, None, None]
    assert doc["tensors"][0][-1] == doc["tensors"][1][-1] and doc["tensors"][2][-1] == doc["tensors"][3][-1]
    assert len(doc["tensor_kinds"]) == 4
    # the rows are exactly what folding the full form gives, and they write the same JSON
    assert compact(full) == doc
    assert json_form.render(doc) == json_form.render(full) and json_form.render(doc, full=True) == json_form.render(full, full=True)


def test_a_compact_report_of_schema_version_3_reads_as_its_full_form():
    """Schema_version 3 rows had no ``view_of`` (their kind held it): a saved report of 3 expands to the
    same records, and ``upgrade`` gives the full form of the current version (what `explain REPORT.json`
    reads)."""
    from tensorscope.compact import OWN, expand, upgrade
    from tensorscope.report import SCHEMA_VERSION

    full = _full_doc()
    kinds, rows = [], []
    for t in full["tensors"]:  # version 3's rows: a kind per tensor here, holding its view_of
        kinds.append({k: v for k, v in t.items() if k not in OWN or k == "view_of"})
        rows.append([t[k] for k in OWN if k != "view_of"] + [len(kinds) - 1])
    old = dict(full, schema_version=3, form="compact", tensor_kinds=kinds, tensors=rows,
               storages=[s for s in full["storages"] if len(s["tensors"]) > 1],
               version_counters=full["version_counters"][:1])
    assert [t["view_of"] for t in full["tensors"]] == [None, "t1", None, None]
    assert expand(old)["tensors"] == full["tensors"]
    assert upgrade(old) == dict(full, schema_version=SCHEMA_VERSION) and SCHEMA_VERSION == 4
