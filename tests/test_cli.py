"""The command line contract: exit codes, output modes, stdin, python -m (real CLI, real programs).

The runs whose subject is the report, the parsing of the command line or the CLI's exit codes are forks
of one process that imported torch once (tests/_forked.py), started by the module fixture ``forked`` or
run_cli's fork server; the comparisons with python's own run, and what a fresh process imports, run
`python -m tensorscope` (``fresh=True``) and `python` of their own.
"""

from __future__ import annotations

import textwrap

import pytest

from _cli import load_report, run_cli, run_python, runs_of_selected_tests


def prog(tmp_path, code, name="prog.py"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(code).lstrip())
    return p


OK = """
    import sys, torch
    a = torch.ones(3, requires_grad=True)
    b = a.detach()
    print("argv", sys.argv[1:], "name", __name__)
    print("err line", file=sys.stderr)
"""


EXIT_CODES = [
    ("import sys\nsys.exit(3)\n", 3),
    ("raise ValueError('boom')\n", 1),
    ("import sys\nsys.exit('bye')\n", 1),
    ("print('fine')\n", 0),
]

USAGE_ERRORS = [
    (["run", "does/not/exist.py"], 2),
    (["run", "."], 2),
    (["run", "--bogus", "x.py"], 2),
    (["explain", "--message", ""], 2),
    (["explain", "--message", "RuntimeError: something unrelated"], 3),
    (["explain", "-", "--json"], 2),  # options after '-' (nothing runs to take them) are refused
]

BAD = """
    import torch
    a = torch.tensor([1., 2, 3], requires_grad=True)
    out = a.sigmoid()
    out.detach().zero_()
    out.sum().backward()
"""

FINE = """
    import torch
    x = torch.tensor(1.0, requires_grad=True)
    y = x ** 2
    y.detach().zero_()
    y.backward()
    print(x.grad.item())
"""

OPS = """
    import torch
    a = torch.ones(3)
    b = a.view(3)
    b.mul_(2)
    c = a @ b
"""


@pytest.fixture(scope="module")
def forked(request, tmp_path_factory):
    """{test name: {label: (returncode, stdout, stderr, doc)}}: the runs of this file that fork (and
"folder": where they ran)."""
    folder = tmp_path_factory.mktemp("cli")
    ok, bad, fine, ops = (prog(folder, code, name) for code, name in
                          ((OK, "ok.py"), (BAD, "bad.py"), (FINE, "fine.py"), (OPS, "ops.py")))
    at = {"cwd": folder}
    jobs = {
        "test_run_prints_program_output_then_report": {"run": ("tensorscope", "run", ok, "--", "x", "--y", at)},
        "test_json_mode_is_one_document_and_program_stdout_goes_to_stderr": {
            "run": ("tensorscope", "run", "--json", ok, at)},
        "test_output_file_leaves_program_output_byte_identical": {
            "txt": ("tensorscope", "run", "-o", folder / "r.txt", ok, at)},
        "test_exit_status_mirrors_python": {
            code: ("tensorscope", "run", "--json", prog(folder, code, f"exit{i}.py"), at)
            for i, (code, _) in enumerate(EXIT_CODES)},
        "test_program_from_stdin_and_python_dash_m": {
            "run": ("tensorscope", "run", "--json", "-",
                    {"cwd": folder, "stdin": "import torch\nx = torch.zeros(2)\ny = x.view(2)\n"})},
        "test_usage_errors_have_codes_and_no_traceback": {
            " ".join(args): ("tensorscope", *args, at) for args, _ in USAGE_ERRORS},
        "test_explain_exit_codes": {"bad": ("tensorscope", "explain", "--json", bad, at),
                                    "fine": ("tensorscope", "explain", "--json", fine, at)},
        "test_version_flag_of_python_dash_m_help": {"help": ("tensorscope", "--help", at)},
        "test_ops_mode_records_aten_ops_with_writes": {"ops": ("tensorscope", "run", "--ops", "--json", ops, at),
                                                      "plain": ("tensorscope", "run", "--json", ops, at)},
    }
    return {"folder": folder, **runs_of_selected_tests(request, __file__, jobs)}


def test_run_prints_program_output_then_report(forked):
    rc, out, err, _ = forked["test_run_prints_program_output_then_report"]["run"]
    assert rc == 0
    assert out.startswith("argv ['x', '--y'] name __main__\n")
    assert "clean: no backward call" in out and "Aliasing" in out and "Timeline" in out
    assert err == "err line\n"


def test_json_mode_is_one_document_and_program_stdout_goes_to_stderr(forked):
    rc, out, err, doc = forked["test_json_mode_is_one_document_and_program_stdout_goes_to_stderr"]["run"]
    assert rc == 0
    assert doc is not None and doc["schema_version"] == 4
    assert doc["program"]["exit_status"] == 0
    assert "argv [] name __main__" in err
    a, = [t for t in doc["tensors"] if "a" in t["names"]]
    b, = [t for t in doc["tensors"] if "b" in t["names"]]
    assert a["storage"] == b["storage"] and a["version_counter"] == b["version_counter"]


def test_output_file_leaves_program_output_byte_identical(tmp_path, forked):
    p = prog(tmp_path, OK)
    expected = run_python(p, "1", cwd=tmp_path)
    rc, out, err, _ = run_cli("run", "-o", str(tmp_path / "r.json"), str(p), "--", "1", cwd=tmp_path, fresh=True)
    assert (rc, out, err) == expected
    doc = load_report((tmp_path / "r.json").read_text())
    assert doc["program"]["argv"] == [str(p), "1"]
    rc, out, _, _ = forked["test_output_file_leaves_program_output_byte_identical"]["txt"]
    assert rc == 0 and out.startswith("argv [] name __main__\n") and "Aliasing" not in out
    assert "Aliasing" in (forked["folder"] / "r.txt").read_text()


@pytest.mark.parametrize("code,status", EXIT_CODES)
def test_exit_status_mirrors_python(tmp_path, code, status, forked):
    p = prog(tmp_path, code)
    expected = run_python(p, cwd=tmp_path)
    assert expected[0] == status
    assert run_cli("run", "-o", str(tmp_path / "r.json"), str(p), cwd=tmp_path, fresh=True)[:3] == expected
    rc, _, err, doc = forked["test_exit_status_mirrors_python"][code]
    assert rc == status and doc["program"]["exit_status"] == status


def test_program_from_stdin_and_python_dash_m(forked):
    rc, out, _, doc = forked["test_program_from_stdin_and_python_dash_m"]["run"]
    assert rc == 0
    x, = [t for t in doc["tensors"] if "x" in t["names"]]
    y, = [t for t in doc["tensors"] if "y" in t["names"]]
    assert y["view_of"] == x["id"] and y["storage"] == x["storage"]


@pytest.mark.parametrize("args,code", USAGE_ERRORS)
def test_usage_errors_have_codes_and_no_traceback(args, code, forked):
    rc, out, err, _ = forked["test_usage_errors_have_codes_and_no_traceback"][" ".join(args)]
    assert rc == code
    assert "Traceback" not in err and "Traceback" not in out
    assert err.strip()


def test_explain_exit_codes(forked):
    runs = forked["test_explain_exit_codes"]
    rc, out, err, doc = runs["bad"]
    assert rc == 1 and doc["diagnosis"]["kind"] == "inplace-modified-saved-tensor"
    assert doc["diagnosis"]["culprit"]["line"] == 4
    assert doc["diagnosis"]["saved_by"]["line"] == 3
    assert doc["diagnosis"]["backward"]["line"] == 5
    rc, out, err, doc = runs["fine"]
    assert rc == 0 and doc["diagnosis"] is None and doc["hazards"] == []
    assert "2.0" in err  # the program's own stdout went to stderr


def test_syntax_error_shown_as_python_shows_it(tmp_path):
    p = prog(tmp_path, "def f(:\n    pass\n")
    expected = run_python(p, cwd=tmp_path)
    got = run_cli("run", "-o", str(tmp_path / "r.json"), str(p), cwd=tmp_path, fresh=True)[:3]
    assert got == expected
    doc = load_report((tmp_path / "r.json").read_text())
    assert doc["program"]["exception"]["type"] == "SyntaxError"


def test_version_flag_of_python_dash_m_help(forked):
    rc, out, _, _ = forked["test_version_flag_of_python_dash_m_help"]["help"]
    assert rc == 0 and "run" in out and "explain" in out


def test_ops_mode_records_aten_ops_with_writes(forked):
    rc, out, err, doc = forked["test_ops_mode_records_aten_ops_with_writes"]["ops"]
    assert rc == 0
    ops = [(e["line"], e["op"]) for e in doc["events"] if e["kind"] == "op"]
    assert (3, "view") in ops and (4, "mul_") in ops and (5, "dot") in ops
    mul, = [e for e in doc["events"] if e["kind"] == "op" and e["op"] == "mul_"]
    b, = [t for t in doc["tensors"] if "b" in t["names"]]
    assert mul["written"] == [b["id"]]
    # the default mode records no op events
    _, _, _, plain = forked["test_ops_mode_records_aten_ops_with_writes"]["plain"]
    assert not [e for e in plain["events"] if e["kind"] == "op"]


@pytest.mark.parametrize("argv, params", [
    (["run", "p.py"], {"program": "p.py", "args": []}),
    (["run", "-o", "r.json", "--json", "p.py", "a", "--help", "-o", "x"],
     {"output": "r.json", "json_": True, "program": "p.py", "args": ["a", "--help", "-o", "x"]}),
    (["run", "--output=r.json", "--device", "cpu", "--timeout=5", "--fail-on", "hazard", "-m", "pkg.mod"],
     {"output": "r.json", "device": "cpu", "timeout": "5", "fail_on": "hazard", "module": True, "program": "pkg.mod",
      "args": []}),
    (["explain", "--report", "--tensor", "x", "--line", "3", "p.py"],
     {"report": True, "tensor": "x", "line": "3", "program": "p.py", "args": []}),
])
def test_common_command_lines_are_parsed_without_typer(argv, params):
    """See NOTE [The command line without typer]: the parameters typer gives the same command body."""
    from tensorscope import cli

    body, got = cli._fast_params(argv)
    assert body is (cli._run if argv[0] == "run" else cli._explain)
    assert got == params


@pytest.mark.parametrize("argv", [
    [], ["run"], ["--version"], ["run", "--help"], ["run", "--traceback", "p.py"], ["run", "--", "p.py"],
    ["run", "p.py", "--", "a"], ["run", "-"], ["run", "--bogus", "p.py"], ["run", "-o"], ["run", "-o", "--json", "p.py"],
    ["run", "-o", "a", "-o", "b", "p.py"], ["run", "--json=1", "p.py"], ["run", "--report", "p.py"],
    ["explain", "--message", "text"], ["explain", "-"], ["explain", "--check-values", "p.py"], ["-o", "r.json", "p.py"],
])
def test_other_command_lines_go_to_typer(argv):
    from tensorscope import cli

    assert cli._fast_params(argv) is None


def test_a_run_imports_no_typer_and_help_still_comes_from_typer(tmp_path):
    p = prog(tmp_path, """
        import sys
        print(sorted(m for m in ("typer", "click") if m in sys.modules))
    """)
    rc, out, err, _ = run_cli("run", "-o", str(tmp_path / "r.json"), str(p), cwd=tmp_path, fresh=True)
    assert (rc, out, err) == (0, "[]\n", "")
    rc, out, err, _ = run_cli("run", "--help", cwd=tmp_path)
    assert rc == 0 and "Usage:" in out and "--check-values" in out
    rc, out, err, _ = run_cli("run", "--bogus", str(p), cwd=tmp_path)
    assert rc == 2 and out == "" and err.startswith("tensorscope: No such option '--bogus'")
