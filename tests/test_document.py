"""One document: every surface writes the same top-level keys, in the same order (NOTE [One document skeleton]).

The documents come from real runs: the CLI's run, explain of a program, of a pasted traceback
(stdin and --message), of a saved report, of a program that does not compile; the Python API's
inspect(), the pytest plugin's report of a test and the IPython magic's (one subprocess for the
three in-process surfaces). The reference is the JSON Schema: each document has exactly its
top-level properties and validates against it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tensorscope.compact import expand

from _cli import load_report, load_schema, run_many, validate_against_schema

pytest.importorskip("IPython", reason="one of the surfaces compared is the IPython magic (the `test` extra installs IPython)")

PROGRAM = """import torch
a = torch.randn(3, requires_grad=True)
out = a.sigmoid()
out.detach().zero_()
out.sum().backward()
"""

# the API, the pytest plugin and the IPython magic, in one process (one import of torch)
IN_PROCESS = r'''
import json, sys
import pytest, torch
import tensorscope
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

docs = {}
x = torch.ones(3, requires_grad=True)
try:
    with tensorscope.inspect() as rep:
        z = (x * 2).sigmoid()
        z.detach().mul_(2)
        z.sum().backward()
except RuntimeError:
    pass
docs["inspect"] = rep.doc

config = Config()
config.HistoryManager.hist_file = ":memory:"
shell = InteractiveShell.instance(config=config)
shell.run_cell("%load_ext tensorscope")
shell.run_cell("import torch\nw = torch.ones(3, requires_grad=True)")
with capture_output() as captured:
    shell.run_cell("%%tensorscope --json\nv = w * 2\nv.detach().zero_();\n")
docs["ipython"] = json.loads(captured.stdout)


class Grab:
    @pytest.hookimpl(tryfirst=True)  # a firstresult hook: before the report is made
    def pytest_runtest_makereport(self, item, call):
        if call.when == "call":
            inspector = item.config.pluginmanager.get_plugin("tensorscope-inspector")
            docs["pytest"] = item.stash[inspector.reports].doc


code = pytest.main(["-q", "-p", "no:cacheprovider", "--tensorscope", "test_one.py"], plugins=[Grab()])
assert code == 1, code  # the test fails: its backward raises
with open(sys.argv[1], "w") as f:
    json.dump(docs, f)
'''

TEST_FILE = """import torch


def test_one():
    x = torch.ones(3, requires_grad=True)
    z = (x * 2).sigmoid()
    z.detach().mul_(2)
    z.sum().backward()
"""


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("document")
    prog = tmp / "sig.py"
    prog.write_text(PROGRAM)
    (tmp / "broken.py").write_text("import torch\nx = (\n")
    # forks of one process (tests/_forked.py), in two rounds: the second reads what the first wrote
    docs = {}
    (rc_py, _, traceback_text), run, explain, unrecognised, broken = run_many([
        ("python", prog), ("tensorscope", "run", "--json", prog, {"cwd": tmp}),
        ("tensorscope", "explain", "-o", tmp / "r.json", prog, {"cwd": tmp}),
        ("tensorscope", "explain", "--json", "--message", "hello", {"cwd": tmp}),
        ("tensorscope", "run", "--json", tmp / "broken.py", {"cwd": tmp})])
    assert rc_py == 1 and "modified by an inplace operation" in traceback_text
    rc, out, err, docs["run"] = run
    assert rc == 1, err[-2000:]
    rc, out, err, _ = explain
    assert rc == 1, err[-2000:]
    docs["explain program"] = load_report((tmp / "r.json").read_text())
    last_line = traceback_text.strip().splitlines()[-1]
    saved, pasted, message = run_many([
        ("tensorscope", "explain", "--json", tmp / "r.json", {"cwd": tmp}),
        ("tensorscope", "explain", "--json", "-", {"cwd": tmp, "stdin": traceback_text}),
        ("tensorscope", "explain", "--json", "--message", last_line, {"cwd": tmp})])
    for name, (rc, out, err, docs[name]) in (("explain report.json", saved), ("explain -", pasted),
                                             ("explain --message", message)):
        assert rc == 1, err[-2000:]
    rc, out, err, docs["explain --message, unrecognised"] = unrecognised
    assert rc == 3, err[-2000:]
    rc, out, err, docs["run, did not compile"] = broken
    assert rc == 1 and "SyntaxError" in err, err[-2000:]

    (tmp / "test_one.py").write_text(TEST_FILE)
    (tmp / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["IPYTHONDIR"] = str(tmp / "ipython")
    (tmp / "in_process.py").write_text(IN_PROCESS)
    proc = subprocess.run([sys.executable, str(tmp / "in_process.py"), str(tmp / "docs.json")], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    for surface, doc in json.loads((tmp / "docs.json").read_text()).items():
        if doc.get("form") == "compact":  # the magic's --json prints the compact form
            validate_against_schema(doc)
            doc = expand(doc)
        docs[f"API {surface}"] = doc

    from tensorscope import api

    block = api._Block(None, 0, ("run", "auto", False), str(prog))  # what an internal error leaves the API
    docs["API inspect, report not built"] = api._bare_doc(block, None, "internal error in tensorscope: (a test)")
    return docs


def test_every_surface_writes_the_same_keys_in_the_same_order(documents):
    schema = load_schema()
    assert schema is not None, "the schema file is missing"
    expected = set(schema["properties"])
    first = None
    for surface, doc in documents.items():
        assert doc is not None, surface
        assert set(doc) == expected, (surface, set(doc) ^ expected)
        if first is None:
            first = (surface, list(doc), list(doc["events_summary"]))
        assert list(doc) == first[1], (surface, list(doc), first)
        # per_site_limit and max_events too, whether or not anything ran
        assert list(doc["events_summary"]) == first[2], (surface, doc["events_summary"], first)


def test_every_surfaces_document_validates_against_the_schema(documents):
    for surface, doc in documents.items():
        assert validate_against_schema(doc), "the schema file is missing"


def test_the_documents_say_what_each_surface_saw(documents):
    """The same keys, and the values each surface is to give them (not one document copied)."""
    kind = "inplace-modified-saved-tensor"
    for surface in ("run", "explain program", "explain report.json", "explain -", "explain --message",
                    "API inspect", "API pytest"):
        assert documents[surface]["diagnosis"]["kind"] == kind, (surface, documents[surface]["diagnosis"])
    for surface in ("explain -", "explain --message"):
        doc = documents[surface]
        assert doc["program"] is None and doc["recording"] is None and doc["message"]["exception_type"] == "RuntimeError"
    assert documents["explain --message, unrecognised"]["diagnosis"] is None
    assert documents["run, did not compile"]["program"]["exception"]["type"] == "SyntaxError"
    assert documents["run"]["message"] is None and documents["run"]["recording"] is not None
    assert documents["API ipython"]["diagnosis"] is None
    assert [t["names"] for t in documents["API ipython"]["tensors"] if "v" in t["names"]] == [["v"]]
    assert documents["API inspect, report not built"]["notes"] == ["internal error in tensorscope: (a test)"]
