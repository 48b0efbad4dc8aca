"""The recording as plain data: re-explaining a saved report, and diagnoses made from hand-built recordings.

- real runs: `explain -o r.json PROG`, the program deleted, then `explain r.json` gives the same
  diagnosis and hazards (the source it quotes was recorded in the report);
- hand-built Recordings (no torch, no subprocess) diagnosed by tensorscope.diagnose;
- the exact JSON round trip of a Recording and of a report's recording object.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from _cli import load_report, REPO, run_cli, run_many, validate_against_schema
from tensorscope import report
from tensorscope import diagnose
from tensorscope.cli import app
from tensorscope.exitcodes import ExitCode
from tensorscope.recording import Facts, Recording, Site, Snapshot, Source, Tensor

CORPUS = REPO / "tests" / "corpus"
WORLD = REPO / "tests" / "corpus_world"
# one program per family: in-place, backward twice, missing graph, silent hazards (one a
# multi-file package), a fine program
PROGRAMS = {
    "inplace": CORPUS / "inplace_loop_recurrence.py",
    "twice": CORPUS / "twice_rnn_hidden_carried.py",
    "nograd": CORPUS / "nograd_argmax_accuracy_loss.py",
    "hazard": CORPUS / "hazard_exp_data_zero.py",
    "hazard_pkg": WORLD / "hazard_pkg_batchnorm_eval_probe",
    "fine": CORPUS / "fine_training_loop.py",
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Each program copied, explained into r.json, deleted, then r.json explained again."""
    root = tmp_path_factory.mktemp("reexplain")
    progs = {}
    for name, src in PROGRAMS.items():
        where = root / name
        if src.is_dir():
            shutil.copytree(src, where / src.name)
            progs[name] = where / src.name / "main.py"
        else:
            where.mkdir()
            progs[name] = where / src.name
            shutil.copy(src, progs[name])
    # forks of one process (tests/_forked.py), in two rounds: every program explained, then deleted, then
    # every saved report explained
    first = run_many([("tensorscope", "explain", "-o", root / name / "r.json", prog, {"cwd": root / name})
                      for name, prog in progs.items()])
    for name, prog in progs.items():
        shutil.rmtree(prog.parent) if PROGRAMS[name].is_dir() else prog.unlink()  # the program is gone
    second = run_many([("tensorscope", "explain", "-o", root / name / "r2.json", "r.json", {"cwd": root / name})
                       for name in progs])
    out = {}
    for name, (rc1, _, _, _), (rc2, _, err2, _) in zip(progs, first, second):
        out[name] = (rc1, load_report((root / name / "r.json").read_text()), rc2,
                     load_report((root / name / "r2.json").read_text()), err2)
    return out


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_saved_report_explains_the_same_without_the_program(saved, name):
    rc1, doc1, rc2, doc2, err2 = saved[name]
    assert err2 == "", err2
    assert rc2 == rc1 == (ExitCode.OK if name == "fine" else ExitCode.FOUND)
    assert doc1["schema_version"] == doc2["schema_version"] == 4
    assert doc2["diagnosis"] == doc1["diagnosis"]
    assert doc2["hazards"] == doc1["hazards"]
    assert doc2 == doc1  # nothing else changes either
    assert validate_against_schema(doc1) and validate_against_schema(doc2)


def test_the_saved_reports_name_what_the_corpus_expects(saved):
    """The facts behind the re-explained diagnoses (expected lines are the corpus' own markers)."""
    assert saved["inplace"][3]["diagnosis"]["kind"] == "inplace-modified-saved-tensor"
    assert saved["twice"][3]["diagnosis"]["kind"] == "backward-twice"
    assert saved["nograd"][3]["diagnosis"]["kind"] == "no-grad-fn"
    for name in ("hazard", "hazard_pkg"):
        doc = saved[name][3]
        assert [h["kind"] for h in doc["hazards"]][:1] == ["silent-saved-tensor-write"], name
    fine = saved["fine"][3]
    assert fine["diagnosis"] is None and fine["hazards"] == [] and fine["recording"]["sources"] == []
    # the quoted code comes from the recorded source, the program being gone
    culprit = saved["inplace"][3]["diagnosis"]["culprit"]
    assert culprit["code"] and culprit["code"] in "".join(
        s for src in saved["inplace"][3]["recording"]["sources"] for s in src["lines"])


def test_a_report_recording_round_trips(saved):
    for _, doc, _, _, _ in saved.values():
        facts = Facts.from_json(doc["recording"])
        assert facts.to_json() == doc["recording"]
        assert Facts.from_json(json.loads(json.dumps(facts.to_json()))) == facts


def test_reexplain_renders_every_form(saved, tmp_path):
    _, doc, _, _, _ = saved["inplace"]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    rc, out, err, parsed = run_cli("explain", "--json", str(path), cwd=tmp_path)
    # another directory: the same diagnosis, its paths shown relative to this one (absolute here)
    assert rc == ExitCode.FOUND, err
    for key in ("kind", "explanation", "fix"):
        assert parsed["diagnosis"][key] == doc["diagnosis"][key]
    assert parsed["diagnosis"]["culprit"]["line"] == doc["diagnosis"]["culprit"]["line"]
    runner = CliRunner()
    for form in ("x.html", "x.sarif"):
        result = runner.invoke(app, ["explain", "-o", str(tmp_path / form), str(path)])
        assert result.exit_code == ExitCode.FOUND, result.output
        assert (tmp_path / form).stat().st_size > 0
    assert json.loads((tmp_path / "x.sarif").read_text())["runs"][0]["results"]
    result = runner.invoke(app, ["explain", "--fail-on", "diagnosis", str(path)])
    assert result.exit_code == ExitCode.FAIL_ON
    result = runner.invoke(app, ["explain", str(path)])
    assert result.exit_code == ExitCode.FOUND and "inplace-modified-saved-tensor" in result.stdout


@pytest.mark.parametrize("content, says", [
    ("{\"schema_version\": 1, \"program\": {}, \"tensors\": []}", "schema_version 1"),
    ("{\"a\": 1}", "not a tensorscope report"),
    ("[1, 2]", "not a tensorscope report"),
    ("{not json", "not a JSON file"),
    ("{\"schema_version\": 2, \"program\": {}, \"tensors\": [], \"recording\": {\"sources\": 3}}", "malformed"),
])
def test_a_file_that_is_no_report_is_a_usage_error(tmp_path, content, says):
    path = tmp_path / "r.json"
    path.write_text(content)
    result = CliRunner().invoke(app, ["explain", str(path)])
    assert result.exit_code == ExitCode.USAGE
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.output


def test_a_saved_report_takes_no_program_arguments(tmp_path):
    result = CliRunner().invoke(app, ["explain", str(tmp_path / "r.json"), "--json"])
    assert result.exit_code == ExitCode.USAGE and "takes no arguments" in result.stderr


# --- hand-built recordings: the analysis without torch or a subprocess --------------------------------

INPLACE = """import torch
x = torch.ones(3, requires_grad=True)
y = x * 2
z = y.pow(2)
y.mul_(2)
z.sum().backward()
"""
VERSION_ERROR = ("one of the variables needed for gradient computation has been modified by an inplace "
                 "operation: [torch.FloatTensor [3]], which is output 0 of MulBackward0, is at version 1; "
                 "expected version 0 instead. Hint: enable anomaly detection to find the operation that "
                 "failed to compute its gradient, with torch.autograd.set_detect_anomaly(True).")
TWICE = """import torch
x = torch.ones(2, requires_grad=True)
y = (x * x).sum()
y.backward()
y.backward()
"""
FREED_ERROR = ("Trying to backward through the graph a second time (or directly access saved tensors after "
               "they have already been freed). Saved intermediate values of the graph are freed when you call "
               ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
               "graph a second time or if you need to access saved tensors after calling backward.")


def _doc(rec: Recording, file: Path, exception: dict | None) -> dict:
    program = {"path": str(file), "module": None, "argv": [str(file)], "exit_status": 1 if exception else 0,
               "exception": exception}
    doc = report.build(rec, command="explain", program=program, torch_version="2.13.0", device_mode="auto")
    diagnose.attach(doc, rec)
    return doc


def _tensor(tid, **kw):
    return Tensor(id=tid, shape=(3,), stride=(1,), dtype="float32", device="cpu", storage="s" + tid[1:],
                  storage_offset=0, nbytes=12, byte_range=(0, 12), version=0, requires_grad=True, is_leaf=False,
                  **kw)


def _inplace_recording(file: str) -> Recording:
    write = {"op": "mul_", "file": file, "line": 5, "segment": "y.mul_(2)", "alias": "y", "library": None,
             "version_before": 0, "version_after": 1, "grad_enabled": True, "tensor": "t2", "bumped": True}
    saved = {"tensor": "t2", "version_at_save": 0, "version_now": 1, "saved_file": file, "saved_line": 4,
             "node": "PowBackward0", "is_output": False, "writes": (write,), "silent": (), "names": ("y",)}
    failure = {"where": "backward", "op": "backward", "file": file, "line": 6, "segment": "z.sum().backward()",
               "exception_type": "RuntimeError", "message": VERSION_ERROR, "library": None, "saved": saved,
               "roots": ({"tensor": "t3", "requires_grad": True, "grad_fn": "SumBackward0", "names": ()},),
               "backwards_before": ()}
    return Recording(
        tensors=(_tensor("t1", grad_fn=None), _tensor("t2", grad_fn="MulBackward0"),
                 _tensor("t3", grad_fn="SumBackward0")),
        names={"t2": ("y",)}, created={"t1": {"file": file, "line": 2, "how": "ones", "source": None}},
        failure=failure, saved_failure=saved,
        backwards=({"file": file, "line": 6, "op": "backward", "retain_graph": False, "ok": False, "seq_now": 4,
                    "roots": failure["roots"]},),
        snapshot=Snapshot(named={"t1": ("x",), "t2": ("y",)}, alive=("t1", "t2", "t3")))


def test_hand_built_inplace_failure_names_the_write(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text(INPLACE)
    file = str(prog)
    exc = {"type": "RuntimeError", "message": VERSION_ERROR, "file": file, "line": 6}
    doc = _doc(_inplace_recording(file), prog, exc)
    d = doc["diagnosis"]
    assert d["kind"] == "inplace-modified-saved-tensor"
    assert (d["culprit"]["line"], d["culprit"]["code"], d["culprit"]["alias"]) == (5, "y.mul_(2)", "y")
    assert (d["saved_by"]["line"], d["backward"]["line"]) == (4, 6)
    # the report carries its own source: the diagnosis survives the file
    assert doc["recording"]["sources"][0]["lines"] == INPLACE.splitlines(keepends=True)
    prog.write_text("# another program now\n")
    again = json.loads(json.dumps(doc))
    diagnose.reexplain(again)
    assert again["diagnosis"] == d


def test_hand_built_caught_failure_is_not_the_diagnosis(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text(INPLACE)
    rec = _inplace_recording(str(prog))
    assert _doc(rec, prog, None)["diagnosis"] is None  # caught, and the program exited 0
    other = {"type": "ValueError", "message": "bad shape", "file": str(prog), "line": 3}
    d = _doc(rec, prog, other)["diagnosis"]
    assert d["kind"] == "other" and d["culprit"]["line"] == 3


def test_hand_built_backward_twice(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text(TWICE)
    file = str(prog)
    roots = ({"tensor": "t2", "requires_grad": True, "grad_fn": "SumBackward0", "names": ("y",)},)
    first = {"file": file, "line": 4, "segment": "y.backward()", "retain_graph": False, "seq_now": 2, "ok": True,
             "roots": roots, "op": "backward"}
    failure = {"where": "backward", "op": "backward", "file": file, "line": 5, "segment": "y.backward()",
               "exception_type": "RuntimeError", "message": FREED_ERROR, "roots": roots, "saved": None,
               "library": None, "backwards_before": (first,),
               "graph": {"freed": ({"seq": 0, "node": "MulBackward0", "freed_by": 0},), "nodes": 2, "min_seq": 0,
                         "locals": ({"name": "y", "tensor": "t2", "seq": 1, "node": "SumBackward0",
                                     "in_failing_graph": True, "reaches_freed": True, "in_earlier_graph": True},)}}
    rec = Recording(tensors=(_tensor("t1", grad_fn=None), _tensor("t2", grad_fn="SumBackward0")),
                    failure=failure, backwards=(first, dict(first, line=5, ok=False)), node_lines=((0, file, 3),),
                    snapshot=Snapshot(named={"t1": ("x",), "t2": ("y",)}, alive=("t1", "t2")))
    doc = _doc(rec, prog, {"type": "RuntimeError", "message": FREED_ERROR, "file": file, "line": 5})
    d = doc["diagnosis"]
    assert d["kind"] == "backward-twice"
    assert (d["culprit"]["line"], d["backward"]["line"], d["saved_by"]["line"]) == (4, 5, 3)
    assert "`y`" in d["explanation"]
    assert doc["recording"]["node_lines"] == [[0, file, 3]]


def test_recording_round_trip_is_exact():
    rec = Recording(
        tensors=(_tensor("t1", grad_fn=None, is_view=True, view_of="t2", storage_nbytes=48, storage_ptr=1 << 40),),
        names={"t1": ("a", "b")}, created={"t1": {"file": "/p.py", "line": 2, "how": "view", "source": "t2",
                                                  "shares_version_counter": True}},
        events=({"seq": 1, "kind": "write", "file": "/p.py", "line": 3, "also_changed": ("t2",), "ok": None,
                 "saved_hits": ({"saved": "t1", "bumped": False},), "ratio": 0.5},),
        sites=(Site("write", "/p.py", 3, 40), Site("alias", None, None, 1)), aggregated=39, per_site=20,
        max_events=20000, failure={"message": "x", "graph": {"nodes": ({"next": ("n2",)},)}},
        hazards=({"tensor": "t1", "writes": ()},), node_lines=((7, "/p.py", 2),), notes=("a note",),
        snapshot=Snapshot(named={"t1": ("a",)}, alive=("t1",), view_of={"t1": "t2"}, counters={"t1": "v1"},
                          has_grad={"t1": None}, roles={"t1": "parameter"},
                          optimizers=({"name": "opt", "type": "SGD", "parameters": ("t1",), "state_keys": ()},)))
    text = json.dumps(rec.to_json())
    assert Recording.from_json(json.loads(text)) == rec
    assert json.dumps(Recording.from_json(json.loads(text)).to_json()) == text
    facts = rec.facts({"t1"}, sources=(Source.of("/p.py", ["a\n", "b\n"]),))
    assert Facts.from_json(json.loads(json.dumps(facts.to_json()))) == facts
    assert facts.created == rec.created  # the table's tensor, with its source chain
