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


def test_kinds_diagnosis_render_and_report_are_torch_free():
    for sub in ("kinds", "diagnose.py", "verdict.py", "messages.py", "source.py", "render", "report.py"):
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
    upper = ("tensorscope.cli", "tensorscope.session", "tensorscope.render", "tensorscope.diagnose", "tensorscope.verdict",
             "tensorscope.kinds")
    for path in (PKG / "instrument").glob("*.py"):
        bad = {m for m in imports(path) if m.startswith(upper)}
        assert not bad, f"instrument/{path.name} imports {bad}"
    for path in [PKG / "diagnose.py", PKG / "verdict.py", PKG / "messages.py", PKG / "source.py"] + list(
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
    """report.py, diagnose.py, verdict.py, kinds/ and render/ work on the frozen Recording (tensorscope/recording.py):
    they never import instrument/ nor take, read or name the live tracker."""
    for sub in ("diagnose.py", "verdict.py", "kinds", "render", "report.py", "recording.py", "source.py", "messages.py"):
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


# --- the import graph: no cycles, imports at the top (see NOTE [Adding a kind] in tensorscope/kinds) ---------

ROOT = PKG.parent
HEAVY = ("torch", "rich", "networkx", "numpy")  # third-party imports worth deferring into a function


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}


def _targets(node, module: str, packages: bool = True) -> list[str]:
    """The modules an import statement loads: the named one, a submodule named in `from M import sub`,
    and (``packages``) the packages above them (Python initialises a package before its submodules)."""
    if isinstance(node, ast.Import):
        named = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            here = module.split(".") if MODULES[module].name == "__init__.py" else module.split(".")[:-1]
            base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
        subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
        named = subs + ([base] if len(subs) < len(node.names) else [])  # `from pkg import sub` names sub only
    out = []
    for name in named:
        parts = name.split(".")
        out += [".".join(parts[:i]) for i in range(1 if packages else len(parts), len(parts) + 1)]
    # a module's own packages are initialised before it runs: importing from them is no edge back
    own = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
    return [t for t in dict.fromkeys(out) if t in MODULES and t != module and t not in own]


def _imports_by_place(module: str):
    """(module-level imports, function-level imports) of ``module``: lists of (line, import node)."""
    tree = ast.parse(MODULES[module].read_text())
    deferred = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    top, inner = [], []
    for n in ast.walk(tree):
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            (inner if id(n) in deferred else top).append(n)
    return top, inner


def _graph(with_deferred: bool = True) -> dict[str, set[str]]:
    graph = {}
    for m in MODULES:
        top, inner = _imports_by_place(m)
        graph[m] = {t for n in top + (inner if with_deferred else []) for t in _targets(n, m)}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]; counter[0] += 1; stack.append(start); on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = []
                while True:
                    w = stack.pop(); on.discard(w); group.append(w)
                    if w == v:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return out


# Cycles that other work of issue 18 removes (the composed recorder); each entry must still be a cycle.
KNOWN_CYCLES: list = []  # none is left


def test_no_import_cycle_among_tensorscope_modules():
    """Counting imports inside functions too: a cycle hidden by deferring one import is still a cycle."""
    cycles = _cycles(_graph())
    assert [c for c in cycles if c not in KNOWN_CYCLES] == [], "import cycle"
    assert [c for c in KNOWN_CYCLES if c not in cycles] == [], "a known cycle is gone: drop it from KNOWN_CYCLES"


def test_the_cycle_finder_finds_a_cycle_through_a_deferred_import():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _heavy() -> set[str]:
    """tensorscope's modules that import a heavy dependency when imported (directly or through another)."""
    graph = _graph(with_deferred=False)
    heavy = {m for m in MODULES if any(
        (n.module if isinstance(n, ast.ImportFrom) else a.name).split(".")[0] in HEAVY
        for n in _imports_by_place(m)[0] if not (isinstance(n, ast.ImportFrom) and n.level)
        for a in (n.names if isinstance(n, ast.Import) else [None]))}
    grew = True
    while grew:
        more = {m for m in MODULES if m not in heavy and graph[m] & heavy}
        grew = bool(more)
        heavy |= more
    return heavy


# Deferred imports of light tensorscope modules, each with its reason. Entry points (`import tensorscope`,
# the CLI, the pytest plugin, IPython) load what a command needs when it runs it.
ENTRY_POINTS = ("tensorscope", "tensorscope.api", "tensorscope.cli", "tensorscope.ipython", "tensorscope.pytest_plugin")
ALLOWED = {
    # the document work of issue 18 moves explain_text's I/O into cli.py and session's skeleton into report.build
    ("tensorscope.explain_text", "tensorscope.messages"), ("tensorscope.explain_text", "tensorscope.render"),
    ("tensorscope.explain_text", "tensorscope.render.json"),
    ("tensorscope.session", "tensorscope.diagnose"), ("tensorscope.session", "tensorscope"),
    # a clean run has nothing to explain and loads no kind: see NOTE [A clean run loads no kind]
    ("tensorscope.diagnose", "tensorscope.verdict"),
    # the form dispatcher loads only the form asked for
    ("tensorscope.render", "tensorscope.render.json"), ("tensorscope.render", "tensorscope.render.sarif"),
}


def test_imports_of_tensorscope_modules_are_at_the_top():
    """Except a heavy module (it imports torch, rich, networkx or numpy), imported where it is needed so that
    `import tensorscope` and a clean run stay light, an entry point's commands, and ALLOWED."""
    heavy, bad = _heavy(), []
    for m in MODULES:
        if m in ENTRY_POINTS:
            continue
        for n in _imports_by_place(m)[1]:
            for t in _targets(n, m, packages=False):
                if t not in heavy and (m, t) not in ALLOWED:
                    bad.append(f"{MODULES[m].relative_to(ROOT)}:{n.lineno} imports {t} inside a function")
    assert bad == [], bad


def test_kinds_import_nothing_from_instrument():
    for m in MODULES:
        if m.startswith("tensorscope.kinds"):
            top, inner = _imports_by_place(m)
            bad = [t for n in top + inner for t in _targets(n, m) if t.startswith("tensorscope.instrument")]
            assert bad == [], f"{m} imports {bad}"


def test_the_program_is_compiled_before_torch_is_imported(tmp_path):
    """See NOTE [Compile the program before importing torch]: on the real command line, a program that does not
    compile shows its SyntaxError before torch is imported (``-X importtime`` lists each import as it ends, on
    the same stream; torch comes later, for the report's version line)."""
    import os
    import subprocess
    import sys

    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nx = (\n")
    env = {**os.environ, "PYTHONPATH": str(PKG.parent)}
    python = subprocess.run([sys.executable, str(bad)], capture_output=True, text=True)
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "tensorscope", "run", str(bad)],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert (python.returncode, run.returncode) == (1, 1)
    lines = run.stderr.splitlines()
    error = next(i for i, line in enumerate(lines) if line.startswith("SyntaxError"))
    imported = [(i, line.rsplit("|", 1)[-1].strip()) for i, line in enumerate(lines) if line.startswith("import time:")]
    assert {"tensorscope.session", "tensorscope.runner"} <= {m for i, m in imported if i < error}  # it sees imports
    assert [m for i, m in imported if i < error and (m == "torch" or m.startswith("torch."))] == []
    assert "SyntaxError" in python.stderr.splitlines()[-1] and lines[error] == python.stderr.splitlines()[-1]
