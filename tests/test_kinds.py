"""The kinds package: the registry is exhaustive, and each new kind is explained through the real CLI.

The programs in tests/programs/kinds/ are ours, one per kind (the file name is the kind code with
underscores); `# <- culprit` marks the line the diagnosis must name. Plain python confirms each
program fails the way the kind says, and, where the fix rewrites the culprit line, that applying it
removes the error.
"""

from __future__ import annotations

import ast
import importlib
import re
import shutil
from pathlib import Path

import pytest

from _cli import REPO, run_cli, run_python, validate_against_schema
from tensorscope import kinds
from tensorscope.explain import messages

PROGRAMS = REPO / "tests" / "programs" / "kinds"
ERROR_TEXTS = REPO / "tests" / "data" / "error_texts"
NEW = sorted(p.stem.replace("_", "-") for p in PROGRAMS.glob("*.py"))


def fragments(text: str) -> list[str]:
    """The code fragments of a fix: every `...` span."""
    return re.findall(r"`([^`]+)`", text or "")


def parses(code: str) -> bool:
    """Whether a fragment is Python: a statement, an expression, or a decorator (`@once_differentiable`)."""
    if code.startswith("@"):
        code += "\ndef f():\n    pass"
    elif code.startswith("."):  # a method named on its own: `.item()`
        code = "x" + code
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


# --------------------------------------------------------------------------
# The registry


def test_every_kind_module_is_registered_under_its_code():
    files = sorted(p.stem for p in (REPO / "tensorscope" / "kinds").glob("*.py") if not p.stem.startswith("_"))
    assert files == sorted(kinds.MODULES)
    for name in kinds.MODULES:
        module = importlib.import_module(f"tensorscope.kinds.{name}")
        assert module.KIND.code.replace("-", "_") == name
        assert kinds.get(module.KIND.code) is module.KIND
        assert module.KIND.hazard or callable(getattr(module, "explain", None)), name


def test_every_kind_is_in_the_readme_kinds_tables():
    readme = (REPO / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    in_tables = set(re.findall(r"`([a-z][a-z-]+)`", "\n".join(r.split(" | ")[0] for r in rows)))
    assert set(kinds.KINDS) <= in_tables, set(kinds.KINDS) - in_tables


def test_every_kind_is_in_the_schema_and_docs():
    schema = (REPO / "tensorscope" / "schema" / "report.schema.json").read_text()
    errors = (REPO / "docs" / "errors.md").read_text()
    for code in kinds.KINDS:
        assert f'"{code}"' in schema, code
        if code != "silent-saved-tensor-write":
            assert f"`{code}`" in errors, code


def _texts() -> list[str]:
    """Real error texts: the stored ones, and the ones tests/test_messages.py raises live with torch."""
    texts = [p.read_bytes().decode("utf-8", errors="replace") for p in sorted(ERROR_TEXTS.glob("*.txt"))]
    import test_messages

    if test_messages.torch is not None:
        import traceback
        import warnings

        for _, fn, _, _ in test_messages.LIVE:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    fn()
                except Exception:  # noqa: BLE001 - every error text is wanted
                    texts.append(traceback.format_exc())
    return [messages._clean(t) for t in texts]


def test_every_message_pattern_matches_a_real_error_text():
    texts = _texts()
    unmatched = [(p.kind, p.regex.pattern[:80]) for p in messages._PATTERNS
                 if not any(p.regex.search(t) for t in texts)]
    assert not unmatched


def test_every_stored_text_of_a_new_kind_parses_to_it():
    for code in NEW:
        paths = sorted(ERROR_TEXTS.glob(f"{code}__*.txt"))
        assert paths, code
        for path in paths:
            parsed = messages.parse(path.read_text())
            assert parsed is not None and parsed.kind == code, path.name


# --------------------------------------------------------------------------
# The new kinds through the real CLI


def _marked(path: Path, marker: str = "culprit") -> int:
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if re.search(rf"#\s*<-\s*{marker}\b", line):
            return i
    raise AssertionError(f"{path.name} has no `# <- {marker}`")


# Runs every program in one python (one torch import) and prints what each raised.
_PLAIN = """
import json, runpy, sys, warnings
out = {}
for path in sys.argv[1:]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            runpy.run_path(path, run_name="__main__")
            out[path] = None
        except BaseException as e:
            out[path] = [type(e).__name__, str(e)]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """kind code -> (what plain python raised, explain's returncode, stderr and JSON document)."""
    import json

    paths = [str(PROGRAMS / f"{code.replace('-', '_')}.py") for code in NEW]
    script = tmp_path_factory.mktemp("plain") / "plain.py"
    script.write_text(_PLAIN)
    rc, out_py, err_py = run_python(script, *paths)
    assert rc == 0, err_py[-800:]
    raised = json.loads(out_py.strip().splitlines()[-1])
    out = {}
    for code, path in zip(NEW, paths):
        rc, _, err, doc = run_cli("explain", "--json", str(Path(path).relative_to(REPO)))
        out[code] = (raised[path], rc, err, doc)
    return out


@pytest.mark.parametrize("code", NEW)
def test_new_kind_is_named_with_its_culprit_and_a_fix(runs, code):
    raised, rc, err, doc = runs[code]
    assert raised is not None  # plain python fails ...
    parsed = messages.parse(f"{raised[0]}: {raised[1]}")  # ... with this kind's message (or evidence)
    assert (parsed.kind if parsed else "other") == (code if code != "non-leaf-grad-none" else "other")
    assert rc == 1, err[-500:]
    assert validate_against_schema(doc)
    d = doc["diagnosis"]
    assert d["kind"] == code, d
    prog = PROGRAMS / f"{code.replace('-', '_')}.py"
    assert d["culprit"] and d["culprit"]["line"] == _marked(prog), d["culprit"]
    assert d["culprit"]["file"].endswith(prog.name)
    assert d["title"] == kinds.get(code).title
    assert d["fix"] and "Fix line" not in d["fix"]
    for fragment in fragments(d["fix"]):
        assert parses(fragment), (code, fragment)


REWRITES = ["inplace-backward-unsupported", "saved-detached-inplace", "non-leaf-requires-grad"]


@pytest.mark.parametrize("code", REWRITES)
def test_applying_the_rewrite_removes_the_error(runs, code, tmp_path):
    """The fix "replace the line with `...`": done at the culprit line, plain python then runs clean."""
    d = runs[code][3]["diagnosis"]
    m = re.search(r"replace the line with `([^`]+)`", d["fix"])
    assert m, d["fix"]
    prog = PROGRAMS / f"{code.replace('-', '_')}.py"
    lines = prog.read_text().splitlines()
    i = d["culprit"]["line"] - 1
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + m[1]
    fixed = tmp_path / prog.name
    fixed.write_text("\n".join(lines) + "\n")
    rc, _, err = run_python(fixed)
    assert rc == 0, err[-800:]


def test_an_error_that_is_not_about_tensors_says_so(tmp_path):
    prog = tmp_path / "config_error.py"
    prog.write_text("import torch\n\nw = torch.ones(2, requires_grad=True)\nsettings = {}\nlr = settings['lr']\n")
    rc_py, _, err_py = run_python(prog)
    assert rc_py == 1 and "KeyError" in err_py
    rc, _, _, doc = run_cli("explain", "--json", str(prog))
    d = doc["diagnosis"]
    assert d["kind"] == "other" and d["culprit"]["line"] == 5
    assert d["explanation"].startswith("Not a tensor or autograd error")
    assert d["fix"].startswith("Not a tensor or autograd error") and "Fix line" not in d["fix"]
