"""The kinds package: the registry is exhaustive, and each new kind is explained through the real CLI.

The programs in tests/programs/kinds/ are ours, one per kind (the file name is the kind code with
underscores); `# <- culprit` marks the line the diagnosis must name. Plain python confirms each
program fails the way the kind says, and, where the fix rewrites the culprit line, that applying it
removes the error.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import traceback
import warnings
from pathlib import Path

import pytest

from _cli import REPO, run_many, validate_against_schema
from tensorscope import kinds
from tensorscope import messages
from tensorscope.kinds._base import w

try:
    import torch
except ImportError:  # the registry checks are torch-free; the live messages need torch
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

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


def _documented_kind_codes() -> set:
    """The codes in the first column of the kinds tables of docs/kinds.md (its Kinds and DDP kinds)."""
    text = (REPO / "docs" / "kinds.md").read_text()
    codes = set()
    for section in re.split(r"(?m)^## ", text):
        if not section.startswith(("Kinds\n", "DDP kinds\n")):
            continue
        for row in section.splitlines():
            if row.startswith("| `"):
                codes |= set(re.findall(r"`([a-z]+(?:-[a-z]+)*)`", row.split(" | ")[0]))
    return codes


def test_the_docs_kinds_tables_name_exactly_the_registry():
    codes = _documented_kind_codes()
    assert set(kinds.KINDS) <= codes, set(kinds.KINDS) - codes
    assert codes <= set(kinds.KINDS), codes - set(kinds.KINDS)


def test_docs_errors_maps_messages_to_exactly_the_registry():
    rows = [r for r in (REPO / "docs" / "errors.md").read_text().splitlines() if r.startswith('| "') or
            r.startswith("| any ") or r.startswith("| no message")]
    assert rows
    codes = set()
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        found = re.findall(r"`([a-z]+(?:-[a-z]+)*)`", cells[-1])
        assert found, row  # every message row names its kind in the last column
        codes |= set(found)
    assert codes == set(kinds.KINDS), (set(kinds.KINDS) ^ codes)


def test_every_kind_is_in_the_schema():
    schema = (REPO / "tensorscope" / "schema" / "report.schema.json").read_text()
    for code in kinds.KINDS:
        assert f'"{code}"' in schema, code


# --------------------------------------------------------------------------
# Every message pattern, exercised by a real message that torch raises here.
# Each snippet below (and each live case of tests/test_messages.py) makes torch raise;
# the formatted exception, with any warning torch issued first, is the real text.


def _leaf():
    return torch.randn(3, requires_grad=True)


def _grad_input_without_grad():
    torch.autograd.grad((_leaf() * 2).sum(), [torch.randn(3)])


def _retain_grad_without_grad():
    torch.randn(3).retain_grad()


def _hook_without_grad():
    torch.randn(3).register_hook(lambda g: g)


def _functional_strict():
    torch.autograd.functional.jacobian(lambda x: x.detach() * 2, torch.randn(3), strict=True)


def _detach_view():
    base = _leaf() * 1
    view = base[:2]
    view.detach_()


def _hooked_output_written():
    lin = torch.nn.Linear(3, 3)
    lin.register_full_backward_hook(lambda module, grad_in, grad_out: None)
    torch.nn.ReLU(inplace=True)(lin(torch.randn(2, 3)))


def _meta_and_cpu():
    torch.randn(3) + torch.randn(3, device="meta")


def _no_xpu():
    torch.zeros(1, device="xpu")


def _cuda_and_cpu():
    torch.randn(2, 3, device="cuda") @ torch.randn(3, 2)


def _index_on_cpu():
    torch.randn(3, device="cuda").index_select(0, torch.tensor([0]))


def _addmm_cuda_mat2():
    torch.addmm(torch.randn(2, 2), torch.randn(2, 3), torch.randn(3, 2, device="cuda"))


def _conv_cuda_input():
    torch.nn.functional.conv2d(torch.randn(1, 1, 3, 3, device="cuda"), torch.randn(1, 1, 2, 2))


def _non_leaf_grad_used():
    w = _leaf() * 0.1
    (w * w).sum().backward()
    w.grad * 2


def _dual_without_level():
    import torch.autograd.forward_ad as fwAD

    fwAD.make_dual(torch.randn(3), torch.randn(3))


def _function(backward):
    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return backward(g)

    return Fn


def _gradient_count():
    _function(lambda g: g).apply(_leaf(), 2.0).sum().backward()


def _gradient_device():
    _function(lambda g: (g.to("meta"), None)).apply(_leaf(), 2.0).sum().backward()


def _hook_changed(change):
    def run():
        y = _leaf() * 2
        y.register_hook(change)
        y.sum().backward()
    return run


def _grad_assigned(value):
    def run():
        _leaf().grad = value()
    return run


def _save_non_tensor():
    class Keep(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * 3

    Keep.apply(_leaf())


def _deepcopy_non_leaf():
    import copy

    copy.deepcopy({"h": _leaf() * 2})


def _ddp(case):
    def run(ddp_group):
        nn = torch.nn
        if case == "unused":
            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.used, self.aux = nn.Linear(2, 2), nn.Linear(2, 2)

                def forward(self, x):
                    return self.used(x)

            model = nn.parallel.DistributedDataParallel(Model())
            for _ in range(2):
                model(torch.randn(3, 2)).sum().backward()
        else:
            from torch.utils.checkpoint import checkpoint

            class Twice(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(2, 2)

                def forward(self, x):
                    return checkpoint(self.lin, checkpoint(self.lin, x, use_reentrant=True), use_reentrant=True)

            model = nn.parallel.DistributedDataParallel(Twice(), find_unused_parameters=True)
            model(torch.randn(3, 2, requires_grad=True)).sum().backward()
    run.needs_ddp = True
    return run


def _vmap(fn, *shapes, **kw):
    def run():
        torch.vmap(fn, **kw)(*[torch.rand(*s) for s in shapes])
    return run


def _func_grad(fn):
    def run():
        torch.func.grad(fn)(torch.randn(3))
    return run


def _jacrev_of_float():
    torch.func.jacrev(lambda x: 1.0)(torch.randn(3))


def _func_under_saved_hooks():
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        torch.func.grad(lambda x: x.sin().sum())(torch.randn(3))



needs_cuda = pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs a CUDA device")
# (name, fn, kind); cases that need CUDA are run only where a GPU is present
def _anomaly_nan():
    x = torch.tensor([0.0, 4.0], requires_grad=True)
    with torch.autograd.detect_anomaly(check_nan=True):
        torch.where(x > 0, torch.sqrt(x), x).sum().backward()


EXTRA = [
    ("anomaly-nan", _anomaly_nan, "non-finite-value"),
    ("grad-input-without-grad", _grad_input_without_grad, "no-grad-fn"),
    ("retain-grad-without-grad", _retain_grad_without_grad, "no-grad-fn"),
    ("hook-without-grad", _hook_without_grad, "no-grad-fn"),
    ("functional-strict", _functional_strict, "no-grad-fn"),
    ("detach-view", _detach_view, "view-inplace"),
    ("hooked-output-written", _hooked_output_written, "view-inplace"),
    ("meta-and-cpu", _meta_and_cpu, "device-mismatch"),
    ("no-xpu", _no_xpu, "device-mismatch"),
    ("non-leaf-grad-used", _non_leaf_grad_used, "non-leaf-grad-none"),
    ("dual-without-level", _dual_without_level, "forward-ad"),
    ("gradient-count", _gradient_count, "invalid-gradient"),
    ("gradient-device", _gradient_device, "invalid-gradient"),
    ("hook-changed-size", _hook_changed(lambda g: g[:1]), "invalid-gradient"),
    ("hook-changed-type", _hook_changed(lambda g: g.double()), "invalid-gradient"),
    ("grad-assigned-size", _grad_assigned(lambda: torch.zeros(4)), "invalid-gradient"),
    ("grad-assigned-dtype", _grad_assigned(lambda: torch.zeros(3, dtype=torch.float64)), "invalid-gradient"),
    ("grad-assigned-device", _grad_assigned(lambda: torch.zeros(3, device="meta")), "invalid-gradient"),
    ("save-non-tensor", _save_non_tensor, "other"),
    ("deepcopy-non-leaf", _deepcopy_non_leaf, "other"),
    ("vmap-copy-into-unbatched", _vmap(lambda x: torch.zeros(3).copy_(x), (4, 3)), "vmap-inplace"),
    ("vmap-item", _vmap(lambda x: x * x.sum().item(), (4, 3)), "functorch-transform"),
    ("vmap-control-flow", _vmap(lambda x: x if bool(x.sum() > 0) else -x, (4, 3)), "functorch-transform"),
    ("vmap-random", _vmap(lambda x: x.bernoulli_(), (4, 3)), "functorch-transform"),
    ("vmap-random-out", _vmap(lambda x: torch.rand(3, out=x), (4, 3)), "functorch-transform"),
    ("vmap-nonzero", _vmap(lambda x: x.nonzero(), (4, 3)), "functorch-transform"),
    ("vmap-mapped-sizes", _vmap(lambda a, b: a + b, (4, 3), (5, 3)), "functorch-transform"),
    ("vmap-in-dims-structure", _vmap(lambda a, b: a + b, (4, 3), (4, 3), in_dims=(0,)), "functorch-transform"),
    ("vmap-in-dim-range", _vmap(lambda a: a, (4, 3), in_dims=2), "functorch-transform"),
    ("vmap-float-output", _vmap(lambda a: 3.0, (4, 3)), "functorch-transform"),
    ("grad-of-vector", _func_grad(lambda x: x * 2), "functorch-transform"),
    ("grad-of-none", _func_grad(lambda x: None), "functorch-transform"),
    ("jacrev-of-float", _jacrev_of_float, "functorch-transform"),
    ("func-under-saved-hooks", _func_under_saved_hooks, "functorch-transform"),
    ("ddp-unused", _ddp("unused"), "ddp-unused-parameters"),
    ("ddp-ready-twice", _ddp("twice"), "ddp-mark-ready-twice"),
]
CUDA = [
    ("cuda-and-cpu", _cuda_and_cpu, "device-mismatch"),
    ("index-on-cpu", _index_on_cpu, "device-mismatch"),
    ("addmm-cuda-mat2", _addmm_cuda_mat2, "device-mismatch"),
    ("conv-cuda-input", _conv_cuda_input, "device-mismatch"),
]
# Patterns no CPU build of torch 2.13 can raise (CUDA placements, 1.x wordings), each named by a phrase
# of its own: without a GPU, a stored real text (tests/data/error_texts/, sources in its README)
# stands in for the live one.
STORED_ONLY = {
    ("device-mismatch", "but found at least two devices,"): "CUDA",
    ("device-mismatch", "different from other tensors on"): "CUDA (older releases)",
    ("device-mismatch", "CPU tensor, but got tensor on"): "CUDA",
    ("device-mismatch", "should be the same"): "CUDA (input and weight types)",
    ("device-mismatch", "Found no NVIDIA driver on your system."): "a CUDA build on a machine with no NVIDIA driver",
    ("device-mismatch", "No CUDA GPUs are available"): "a CUDA build with no GPU visible",
    ("unused-input", "One of the differentiated Tensors appears to not have been used in the graph."): "1.x",
}


# Patterns of a newer wording that an older release words otherwise, measured on torch 2.2.2 (PyPI's CUDA build):
# its XPU allocation error has no "Torch not compiled with XPU enabled" (a CUDA build cannot say it of CUDA;
# newer releases no longer say "Could not run 'aten::empty...' with arguments from the 'XPU' backend"),
# and 2.2 to 2.11 word the unused input "One of the differentiated Tensors" (no index). Stored real texts of
# those wordings (tests/data/error_texts/) stand in there; which release words it which way is read from the
# live texts themselves, not from the version number.
def _older_wording(code: str, regex: str, live) -> bool:
    texts = [t for _, k, t in live if k == code]
    if code == "device-mismatch" and w("Torch not compiled with") in regex:
        return not any("not compiled with" in t for t in texts)
    if code == "device-mismatch" and w("Could not run") in regex:  # 2.2.2's wording of a missing XPU
        return not any("Could not run" in t for t in texts)
    if code == "unused-input" and w("The differentiated Tensor at index") in regex:
        return any("One of the differentiated Tensors" in t for t in texts)
    return False


def _stored_only(code: str, regex: str, live=()) -> bool:
    return any(c == code and w(phrase) in regex for c, phrase in STORED_ONLY) or _older_wording(code, regex, live)


@pytest.fixture(scope="module")
def ddp_group(tmp_path_factory):
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        yield None
        return
    dist.init_process_group("gloo", init_method=f"file://{tmp_path_factory.mktemp('pg') / 'store'}",
                            rank=0, world_size=1)
    yield True
    dist.destroy_process_group()


def _raise(fn, ddp_group) -> str:
    """Run ``fn`` and return what a terminal shows: the warnings torch issued, then the traceback."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            fn(ddp_group) if getattr(fn, "needs_ddp", False) else fn()
        except Exception:  # noqa: BLE001 - every error text is wanted
            tb = traceback.format_exc()
        else:
            raise AssertionError(f"{fn.__name__} did not raise")
    shown = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in seen)
    return shown + tb


@pytest.fixture(scope="module")
def live(ddp_group):
    """(name, kind, text) for every live case here and in tests/test_messages.py."""
    import test_messages

    cases = [(n, fn, k) for n, fn, k, _ in test_messages.LIVE] + list(EXTRA)
    if torch.cuda.is_available():
        cases += CUDA
    out = []
    for name, fn, kind in cases:
        if getattr(fn, "needs_ddp", False) and ddp_group is None:
            continue
        out.append((name, kind, messages._clean(_raise(fn, ddp_group))))
    return out


@needs_torch
@pytest.mark.parametrize("name,fn,kind", EXTRA + [pytest.param(*c, marks=needs_cuda) for c in CUDA],
                         ids=[c[0] for c in EXTRA + CUDA])
def test_a_real_message_parses_to_its_kind(live, name, fn, kind):
    text = next((t for n, k, t in live if n == name), None)
    if text is None:
        pytest.skip("torch.distributed with gloo is not available")
    parsed = messages.parse(text)
    assert parsed is not None and parsed.kind == kind, (name, parsed and parsed.kind, text[-400:])
    assert parsed.kind in kinds.KINDS


@needs_torch
def test_every_message_pattern_is_exercised_by_a_real_message(live):
    stored = [messages._clean(p.read_text()) for p in sorted(ERROR_TEXTS.glob("*.txt"))]
    unmatched = []
    for code, pattern in kinds.PATTERNS:
        regex = re.compile(pattern.regex)
        if any(k == code and regex.search(t) for _, k, t in live):
            continue
        if _stored_only(code, pattern.regex, live) and any(regex.search(t) for t in stored):
            continue
        unmatched.append((code, pattern.regex[:80]))
    assert not unmatched


@needs_torch
def test_no_real_message_of_one_kind_matches_another_kinds_pattern(live):
    crossed = []
    for code, pattern in kinds.PATTERNS:
        regex = re.compile(pattern.regex)
        crossed += [(name, kind, code) for name, kind, text in live if kind != code and regex.search(text)]
    assert not crossed


def test_stored_only_patterns_are_still_patterns():
    """Each STORED_ONLY phrase names exactly one pattern (so the allowance cannot outlive it)."""
    for code, phrase in STORED_ONLY:
        assert sum(c == code and w(phrase) in p.regex for c, p in kinds.PATTERNS) == 1, (code, phrase)


def test_every_stored_text_parses_to_the_kind_its_name_says():
    for path in sorted(ERROR_TEXTS.glob("*.txt")):
        expected = path.name.split("__")[0]
        parsed = messages.parse(path.read_text())
        assert (parsed.kind if parsed else "none") == expected, path.name


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
    (rc, out_py, err_py), *explained = run_many([("python", script, *paths)] + [
        ("tensorscope", "explain", "--json", str(Path(path).relative_to(REPO))) for path in paths])
    assert rc == 0, err_py[-800:]
    raised = json.loads(out_py.strip().splitlines()[-1])
    return {code: (raised[path], rc, err, doc) for code, path, (rc, _, err, doc) in zip(NEW, paths, explained)}


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


@pytest.fixture(scope="module")
def rewritten(runs, tmp_path_factory):
    """code -> plain python's (returncode, stdout, stderr) on its program with the fix's rewrite applied
    at the culprit line (the fix: "replace the line with `...`")."""
    folder = tmp_path_factory.mktemp("rewritten")
    paths, out = {}, {}
    for code in REWRITES:
        d = runs[code][3]["diagnosis"]
        m = re.search(r"replace the line with `([^`]+)`", d["fix"])
        if m is None:
            out[code] = (None, "", f"the fix rewrites no line: {d['fix']}")
            continue
        prog = PROGRAMS / f"{code.replace('-', '_')}.py"
        lines = prog.read_text().splitlines()
        i = d["culprit"]["line"] - 1
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        lines[i] = indent + m[1]
        paths[code] = folder / prog.name
        paths[code].write_text("\n".join(lines) + "\n")
    out.update(zip(paths, run_many([("python", p) for p in paths.values()])))
    return out


@pytest.mark.parametrize("code", REWRITES)
def test_applying_the_rewrite_removes_the_error(rewritten, code):
    """The fix "replace the line with `...`": done at the culprit line, plain python then runs clean."""
    rc, _, err = rewritten[code]
    assert rc == 0, err[-800:]


def test_an_error_that_is_not_about_tensors_says_so(tmp_path):
    prog = tmp_path / "config_error.py"
    prog.write_text("import torch\n\nw = torch.ones(2, requires_grad=True)\nsettings = {}\nlr = settings['lr']\n")
    (rc_py, _, err_py), (rc, _, _, doc) = run_many([("python", prog), ("tensorscope", "explain", "--json", prog)])
    assert rc_py == 1 and "KeyError" in err_py
    d = doc["diagnosis"]
    assert d["kind"] == "other" and d["culprit"]["line"] == 5
    assert d["explanation"].startswith("Not a tensor or autograd error")
    assert d["fix"].startswith("Not a tensor or autograd error") and "Fix line" not in d["fix"]


def test_an_error_a_library_raised_names_the_call(tmp_path):
    """An exception raised inside a library's code that the program's line called (torch.load's weights_only
    refusal) names that call instead of "the program's own Python logic", and the diagnosis never carries the
    message's terminal escape codes (torch 2.6+ makes part of it bold): NOTE [An exception a library raised
    at the program's line] in session.py, NOTE [Terminal escape codes in a quoted message] in kinds/_base.py.
    Where it was raised comes from python's own traceback."""
    from tensorscope.render.text import render

    prog = tmp_path / "load.py"
    prog.write_text("import torch\n\nclass Box:\n    pass\n\npath = __file__ + '.pt'\ntorch.save({'box': Box()}, path)\n"
                    "state = torch.load(path, weights_only=True)\n")
    (rc_py, _, err_py), (rc, _, _, doc) = run_many([("python", prog), ("tensorscope", "explain", "--json", prog)])
    assert rc_py == 1 and "UnpicklingError" in err_py, err_py
    *_, (file, line, function) = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', err_py)
    raised = doc["program"]["exception"]["raised_in"]
    assert file.endswith("/" + raised["file"]) and raised["file"] == "torch/serialization.py", (file, raised)
    assert raised["line"] == int(line) and raised["function"] == "torch.serialization." + function, raised
    assert raised["call"] == "torch.load", raised
    d = doc["diagnosis"]
    assert d["kind"] == "other" and d["culprit"]["line"] == 8 and rc == 1, d
    assert "`torch.load`" in d["explanation"] and "`torch.load`" in d["fix"], d
    assert "own Python logic" not in d["fix"], d["fix"]
    assert "\x1b" not in json.dumps(d) and "\x1b" not in render(doc), d["explanation"]
