"""The shape of the house, checked by reading imports with ast (see ../shared/STYLE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "tensorscope"


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def modules(sub: str):
    return sorted((PKG / sub).glob("*.py")) if (PKG / sub).is_dir() else [PKG / sub]


def test_analysis_explain_render_and_report_are_torch_free():
    for sub in ("analysis", "explain", "kinds", "render", "report.py"):
        for path in modules(sub):
            bad = {m for m in imports(path) if m == "torch" or m.startswith("torch.")}
            assert not bad, f"{path.name} imports {bad}: only tensorscope.instrument may touch torch"


def test_only_the_cli_parses_arguments():
    for path in PKG.rglob("*.py"):
        if path.name == "cli.py":
            continue
        bad = {m for m in imports(path) if m.split(".")[0] in ("typer", "click", "argparse")}
        assert not bad, f"{path.relative_to(PKG)} imports {bad}"


def test_lower_layers_do_not_import_upper_ones():
    upper = ("tensorscope.cli", "tensorscope.session", "tensorscope.render", "tensorscope.analysis")
    for path in (PKG / "instrument").glob("*.py"):
        bad = {m for m in imports(path) if m.startswith(upper)}
        assert not bad, f"instrument/{path.name} imports {bad}"
    for path in list((PKG / "analysis").glob("*.py")) + list((PKG / "explain").glob("*.py")) + list(
            (PKG / "kinds").glob("*.py")):
        bad = {m for m in imports(path) if m.startswith(("tensorscope.cli", "tensorscope.render", "tensorscope.session"))}
        assert not bad, f"{path.name} imports {bad}"


def _params_and_names(path: Path) -> set[str]:
    """Every parameter name, attribute read and name loaded in a module."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.Name):
            out.add(node.id)
    return out


def test_nothing_after_instrument_sees_the_tracker():
    """report.py, analysis/, render/ and kinds/ work on the frozen Recording (tensorscope/recording.py):
    they never import instrument/ nor take, read or name the live tracker."""
    for sub in ("analysis", "kinds", "render", "report.py", "recording.py"):
        for path in modules(sub):
            bad = {m for m in imports(path) if m.startswith("tensorscope.instrument")}
            assert not bad, f"{path.name} imports {bad}: the live tracker stays inside instrument/"
            names = {n for n in _params_and_names(path) if "tracker" in n.lower() or n in ("recorder", "Recorder")}
            assert not names, f"{path.name} names {names}: it must receive the Recording, not the tracker"


def test_the_recording_is_torch_free_and_plain():
    for m in imports(PKG / "recording.py"):
        assert m.split(".")[0] in ("__future__", "dataclasses", "typing", "hashlib"), m


def test_no_module_imports_another_modules_private_names():
    """The API builds its report from public functions (session.exception_info, instrument.session.record)."""
    for path in (PKG / "api.py", PKG / "session.py", PKG / "cli.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tensorscope"):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.endswith("__")]
                assert not private, f"{path.name} imports {private} from {node.module}"


def _calls(path: Path):
    """Every call in a module, as (dotted name of what is called, the call node)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            parts, f = [], node.func
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            if isinstance(f, ast.Name):
                parts.append(f.id)
            yield ".".join(reversed(parts)), node


def _real_stream(node: ast.expr | None) -> bool:
    """Whether a `file=` argument is the process's own stdout/stderr (`sys.stdout`, `sys.__stderr__`)."""
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "sys"
            and node.attr.strip("_") in ("stdout", "stderr"))


def test_only_the_cli_owns_consoles_and_exit_codes():
    """A renderer draws into the console or file it is given; only cli.py makes a Console on the real
    stdout/stderr, ends the process or picks an exit code (ExitCode, sys.exit, typer.Exit)."""
    for path in PKG.rglob("*.py"):
        if path.name == "cli.py":
            continue
        where = path.relative_to(PKG)
        for name, call in _calls(path):
            if name.split(".")[-1] == "Console":
                kw = {k.arg: k.value for k in call.keywords}
                assert "file" in kw and not _real_stream(kw["file"]), f"{where}:{call.lineno}: a Console on the terminal"
                assert not isinstance(kw.get("stderr"), ast.Constant) or not kw["stderr"].value, f"{where}:{call.lineno}"
            assert name not in ("sys.exit", "exit", "quit", "typer.Exit"), f"{where}:{call.lineno} calls {name}"
        if path.name != "exitcodes.py":
            assert "tensorscope.exitcodes" not in imports(path), f"{where} chooses exit codes: only cli.py does"


def test_the_layer_checks_see_what_they_look_for():
    """The checks above find a Console on the terminal, a sys.exit and an exit code where they are."""
    cli = PKG / "cli.py"
    names = {name for name, _ in _calls(cli)}
    assert {"Console", "sys.exit", "typer.Exit"} <= names
    assert "tensorscope.exitcodes" in imports(cli)
    tree = ast.parse("Console(file=sys.stdout)\nConsole(file=buf)\n")
    files = [c.keywords[0].value for c in ast.walk(tree) if isinstance(c, ast.Call)]
    assert [_real_stream(f) for f in files] == [True, False]
