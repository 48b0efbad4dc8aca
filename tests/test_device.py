"""--device cpu|cuda, and the facts that do not depend on the device.

CPU tests run programs written for CUDA (tests/programs_cuda/) with `--device cpu` and
compare their reports with the same programs written for the CPU ("cuda" replaced by
"cpu", run without --device): storage sharing, views, version counters, versions and
autograd facts must agree. Tests marked `cuda` need a GPU and skip cleanly without one.

Expected values come from torch or from the CPU-written twin, never from tensorscope.
"""

from __future__ import annotations

import ast
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

try:
    from _cli import (REPO, SNIPPETS_DIR, find_tensor, find_tensors, line_of, run_cli, run_many, run_python,
                      validate_against_schema)
except ImportError:  # tests/ became a package
    from tests._cli import (REPO, SNIPPETS_DIR, find_tensor, line_of, run_cli, run_many, run_python,
                            validate_against_schema)

PROGRAMS = REPO / "tests" / "programs_cuda"
HAS_CUDA = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
no_gpu = pytest.mark.skipif(HAS_CUDA, reason="checks the behaviour without a GPU")

# Programs whose "cuda" -> "cpu" twin is the same program for the CPU.
TWINS = ("placements.py", "seed_copy.py", "inplace_saved.py")
NOTE = re.compile(r"^--device cpu: CUDA placements mapped to the CPU \((\d+) calls?\)$")


def cpu_twin(name: str, tmp_path: Path) -> Path:
    """The program with every "cuda" replaced by "cpu", next to the original (same user-code folder rules)."""
    path = tmp_path / name
    path.write_text((PROGRAMS / name).read_text().replace("cuda", "cpu"))
    return path


@pytest.fixture(scope="module")
def twin_runs(tmp_path_factory):
    """For each twin: (`run --json --device cpu` of the CUDA program, `run --json` of the CPU twin), all
    forked from one process that imported torch once (run_many)."""
    tmp = tmp_path_factory.mktemp("twins")
    jobs = []
    for name in TWINS:
        jobs += [("tensorscope", "run", "--json", "--device", "cpu", str(PROGRAMS / name)),
                 ("tensorscope", "run", "--json", str(cpu_twin(name, tmp)))]
    runs = run_many(jobs)
    return {name: (runs[2 * i], runs[2 * i + 1]) for i, name in enumerate(TWINS)}


# --------------------------------------------------------------------------- comparing facts

_FACTS = ("shape", "stride", "dtype", "storage_offset", "nbytes", "byte_range", "version", "requires_grad",
          "is_leaf", "grad_fn", "has_grad", "alive")


def _name(doc, tid):
    for t in doc["tensors"]:
        if t["id"] == tid:
            return tuple(t["names"]) or tid
    return tid


def facts(doc: dict, with_device: bool = False) -> dict:
    """Device-independent facts of every named tensor, with references turned into names."""
    out = {}
    by_storage: dict = {}
    by_counter: dict = {}
    for t in doc["tensors"]:
        key = tuple(t["names"]) or t["id"]
        f = {k: t[k] for k in _FACTS}
        if with_device:
            f["device"] = t["device"]
        f["view_of"] = _name(doc, t["view_of"]) if t["view_of"] else None
        out[key] = f
        if t["alive"]:
            by_storage.setdefault(t["storage"], []).append(key)
            by_counter.setdefault(t["version_counter"], []).append(key)
    for group in list(by_storage.values()):
        for key in group:
            out[key]["same_storage_as"] = sorted(map(str, group))
    for group in list(by_counter.values()):
        for key in group:
            out[key]["same_counter_as"] = sorted(map(str, group))
    return out


def events(doc: dict) -> list:
    """(kind, line, op, tensor, base/source) of every event; op names with cuda -> cpu."""
    rows = []
    for e in doc["events"]:
        op = e.get("op")
        rows.append((e["kind"], e["line"], op.replace("cuda", "cpu") if isinstance(op, str) else op,
                     e.get("tensor"), e.get("base", e.get("source"))))
    return rows


def diagnosis_summary(diag):
    if diag is None:
        return None
    out = {"kind": diag["kind"]}
    for part in ("culprit", "saved_by", "backward"):
        place = diag.get(part)
        out[part] = (place.get("line"), place.get("code"), place.get("alias"), place.get("node")) if place else None
    tensor = diag.get("tensor")
    if tensor:
        out["tensor"] = (tuple(tensor.get("names") or ()), tensor.get("version_at_save"), tensor.get("version_now"))
    return out


# --------------------------------------------------------------------------- --device cpu, on the CPU


@pytest.mark.parametrize("name", TWINS)
def test_cuda_program_on_cpu_has_the_facts_of_its_cpu_twin(twin_runs, name):
    (rc, _, err, doc), (rc_cpu, _, err_cpu, doc_cpu) = twin_runs[name]
    assert doc is not None, err
    assert doc_cpu is not None, err_cpu
    assert rc == rc_cpu
    assert doc["device_mode"] == "cpu" and doc_cpu["device_mode"] == "auto"
    assert facts(doc) == facts(doc_cpu)
    assert events(doc) == events(doc_cpu)
    assert diagnosis_summary(doc["diagnosis"]) == diagnosis_summary(doc_cpu["diagnosis"])
    assert [diagnosis_summary(h) for h in doc["hazards"]] == [diagnosis_summary(h) for h in doc_cpu["hazards"]]
    assert {t["device"] for t in doc["tensors"]} == {"cpu"}
    exc, exc_cpu = doc["program"]["exception"], doc_cpu["program"]["exception"]
    assert (exc and (exc["type"], exc["line"], exc["message"])) == (exc_cpu and (exc_cpu["type"], exc_cpu["line"], exc_cpu["message"]))
    validate_against_schema(doc)


def test_placements_report(twin_runs):
    (rc, _, err, doc), _ = twin_runs["placements.py"]
    assert rc == 0, err
    path = PROGRAMS / "placements.py"
    # the note comes first and counts the rewritten calls: zeros, randn, .to("cuda"), .cuda(),
    # .to(device=), new_tensor, empty_like, Linear.cuda() (2 parameters), Linear.to("cuda") (2)
    m = NOTE.match(doc["notes"][0])
    assert m, doc["notes"]
    assert int(m.group(1)) == 11
    # .to("cuda"), .cuda(), .to(device=) and the four parameter moves returned their input
    assert any("7 of them" in n and "new storage" in n for n in doc["notes"]), doc["notes"]
    x, v = find_tensor(doc, "x"), find_tensor(doc, "v")
    assert v["view_of"] == x["id"] and v["storage"] == x["storage"]
    assert v["version_counter"] == x["version_counter"] and x["version"] == 1
    h, d = find_tensor(doc, "h"), find_tensor(doc, "d")
    assert (h["storage"], h["version_counter"], h["version"]) == (d["storage"], d["version_counter"], 1)
    w = find_tensor(doc, "w")
    assert w["requires_grad"] and w["is_leaf"] and w["has_grad"] is True
    for name in ("model.weight", "model.bias", "head.weight", "head.bias"):
        p = find_tensor(doc, name)
        assert p["device"] == "cpu" and p["is_leaf"] and p["has_grad"] is True
    created = {e["line"] for e in doc["events"] if e["kind"] == "create"}
    assert line_of(path, 'x = torch.zeros(2, 3, device="cuda")') in created


def test_seed_example_new_tensor_and_copy(twin_runs):
    (rc, _, err, doc), _ = twin_runs["seed_copy.py"]
    assert rc == 0, err
    assert NOTE.match(doc["notes"][0]).group(1) == "1"  # only device="cuda"; device="cpu" is left alone
    a, b, c = find_tensor(doc, "a"), find_tensor(doc, "b"), find_tensor(doc, "c")
    assert a["requires_grad"] and a["is_leaf"] and a["dtype"] == "float32"
    # new_tensor: a copy, float64, out of the graph
    assert b["dtype"] == "float64" and not b["requires_grad"] and b["grad_fn"] is None
    assert b["storage"] != a["storage"]
    # copy_ from a tensor requiring grad: the destination joins the graph, keeps its own storage
    ref = torch.zeros((), dtype=torch.float64)
    ref.copy_(torch.tensor(1.0, requires_grad=True))
    assert c["requires_grad"] is True and c["is_leaf"] is False
    assert c["grad_fn"] == type(ref.grad_fn).__name__ == "CopyBackwards"  # as grad_fn=<CopyBackwards> prints
    assert c["storage"] not in (a["storage"], b["storage"]) and c["version"] == 1
    assert a["has_grad"] is True
    assert [e["op"] for e in doc["events"] if e["kind"] in ("copy", "write") and e["tensor"]] == ["new_tensor", "copy_"]


def test_inplace_diagnosis_is_the_same_on_the_cpu(twin_runs):
    (rc, _, err, doc), _ = twin_runs["inplace_saved.py"]
    assert rc == 1
    assert doc["diagnosis"]["kind"] == "inplace-modified-saved-tensor"
    path = PROGRAMS / "inplace_saved.py"
    assert doc["diagnosis"]["culprit"]["line"] == line_of(path, "alias.zero_()")
    assert doc["diagnosis"]["backward"]["line"] == line_of(path, "out.sum().backward()")


@pytest.mark.parametrize("name", ("placements.py", "seed_copy.py"))
def test_cuda_program_prints_what_its_cpu_twin_prints(tmp_path, name):
    """`tensorscope run --device cpu -o FILE` leaves stdout and exit status those of the CPU twin under python."""
    twin = cpu_twin(name, tmp_path)
    rc_py, out_py, _ = run_python(twin, fresh=False)
    report = tmp_path / "report.json"
    rc, out, err, _ = run_cli("run", "--device", "cpu", "-o", str(report), str(PROGRAMS / name))
    assert (rc, out) == (rc_py, out_py), err
    assert report.exists()


def test_utilities_and_default_device_contexts():
    rc, out, err, doc = run_cli("run", "--json", "--device", "cpu", str(PROGRAMS / "utilities.py"))
    assert rc == 0, err
    assert f"available: {HAS_CUDA}" in err  # the program's stdout goes to stderr with --json: the check is untouched
    assert "devices: cpu cpu cpu cpu cpu" in err
    # randn, `with torch.device("cuda")`, set_default_device("cuda"), torch.load(map_location=), .type(cuda type)
    assert NOTE.match(doc["notes"][0]).group(1) == "5"
    if not HAS_CUDA:
        util = [n for n in doc["notes"] if "no-ops" in n]
        assert util and "torch.cuda.synchronize (2)" in util[0] and "torch.cuda.manual_seed (1)" in util[0]
        assert "torch.cuda.manual_seed_all (1)" in util[0]  # torch.manual_seed's own call is not counted
    y, z = find_tensor(doc, "y"), find_tensor(doc, "z")
    assert y["device"] == z["device"] == "cpu"


@no_gpu
def test_plain_python_fails_where_device_cpu_runs(tmp_path):
    """The corpus program that puts its input on "cuda" fails without a GPU; with --device cpu it runs."""
    prog = REPO / "tests" / "corpus" / "device_cuda_input_cpu_model.py"
    rc_py, _, err_py = run_python(prog, fresh=False)
    # a CPU-only build, PyPI's CUDA build without a driver, with a driver but no GPU (docs/compatibility.md)
    no_cuda = ("Torch not compiled with CUDA enabled", "Found no NVIDIA driver on your system", "No CUDA GPUs are available")
    assert rc_py == 1 and any(m in err_py for m in no_cuda), err_py[-500:]
    rc, out, err, doc = run_cli("run", "--json", "--device", "cpu", str(prog))
    assert rc == 0, err
    assert doc["program"]["exception"] is None and doc["diagnosis"] is None
    assert find_tensor(doc, "x")["device"] == "cpu"


@no_gpu
@pytest.mark.parametrize("command", ("run", "explain"))
def test_device_cuda_without_gpu_is_a_usage_error(tmp_path, command):
    marker = tmp_path / "ran"
    prog = tmp_path / "prog.py"
    prog.write_text(f"open({str(marker)!r}, 'w').close()\nprint('ran')\n")
    rc, out, err, _ = run_cli(command, "--device", "cuda", str(prog))
    assert rc == 2
    assert out == ""
    assert not marker.exists()  # refused before the program ran
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tensorscope: --device cuda:"), err
    assert "--device cpu" in lines[0]


def test_default_mode_installs_no_device_machinery(tmp_path):
    prog = tmp_path / "probe.py"
    prog.write_text(
        "import torch\n"
        "print(torch._C._len_torch_function_stack(), torch.empty(0).device)\n"  # get_default_device: 2.3+
        "print(torch.load.__module__, torch.cuda.synchronize.__module__)\n"
        "with torch.device('meta'):\n"
        "    print(torch.zeros(2).device)\n")
    _, out_py, _ = run_python(prog, fresh=False)
    rc, out, err, _ = run_cli("run", "-o", str(tmp_path / "r.json"), str(prog))
    assert rc == 0, err
    assert out == out_py
    assert out.splitlines()[-1] == "meta"  # with torch.device(...) works under the wrappers


def test_device_cpu_is_taken_out_after_the_run():
    """In process: the mode, the utility no-ops and torch.load are restored when the run ends."""
    from tensorscope.instrument import session

    load, sync = torch.load, torch.cuda.synchronize
    before = torch._C._len_torch_function_stack()
    tracker = session.new_tracker(None)
    with session.active(tracker, device="cpu"):
        assert torch._C._len_torch_function_stack() == before + 1
        assert torch.zeros(1, device="cuda").device.type == "cpu"
        assert torch.ones(1).to("cuda:0").device.type == "cpu"
    assert torch._C._len_torch_function_stack() == before
    assert torch.load is load and torch.cuda.synchronize is sync
    assert NOTE.match(tracker.notes[0]).group(1) == "2"
    if not HAS_CUDA:
        with pytest.raises((RuntimeError, AssertionError)):
            torch.zeros(1, device="cuda")


def test_no_event_is_recorded_twice_under_the_mode(tmp_path):
    """Tensor methods re-enter through torch.Tensor under a torch-function mode: one event per call."""
    prog = tmp_path / "writes.py"
    prog.write_text(
        "import torch\n"
        "x = torch.zeros(3, device='cuda')\n"
        "y = x.view(3)\n"
        "y.mul_(2)\n"
        "x[0] = 1.0\n"
        "x.data = torch.ones(3)\n"
        "x.requires_grad = True\n"
        "x.requires_grad_(False)\n")
    rc, _, err, doc = run_cli("run", "--json", "--device", "cpu", str(prog))
    assert rc == 0, err
    rows = [(e["kind"], e["line"]) for e in doc["events"]]
    assert rows == [("create", 2), ("alias", 3), ("write", 4), ("write", 5), ("create", 6), ("write", 6),
                    ("requires_grad", 7), ("requires_grad", 8)], rows


# --------------------------------------------------------------------------- no synchronisation


_NO_SYNC_PLAIN: dict = {}  # device -> `python no_sync.py DEVICE` (both modes compare with the CPU run without a GPU)


@pytest.mark.parametrize("mode", ("auto", "cpu"))
def test_tensorscope_reads_no_tensor_values(tmp_path, mode):
    """Value reads (item, tolist, cpu, bool, ..., aten._local_scalar_dense, torch.cuda.synchronize),
    counted inside the program, are the same under tensorscope as under plain python."""
    prog = PROGRAMS / "no_sync.py"
    device = "cuda" if HAS_CUDA and mode == "auto" else "cpu"  # --device cpu is compared with the CPU run
    if device not in _NO_SYNC_PLAIN:
        _NO_SYNC_PLAIN[device] = run_python(prog, device, fresh=False)
    rc_py, out_py, err_py = _NO_SYNC_PLAIN[device]
    assert rc_py == 0, err_py
    args = ["run", "-o", str(tmp_path / "r.json"), str(prog)]
    if mode == "cpu":
        args[1:1] = ["--device", "cpu"]
        if not HAS_CUDA:  # the CUDA program, mapped to the CPU
            args += ["--", "cuda"]
        else:
            args += ["--", "cpu"]
    else:
        args += ["--", device]
    rc, out, err, _ = run_cli(*args)
    assert rc == 0, err
    assert out == out_py
    assert "'aten._local_scalar_dense': 1" in out and "'item': 1" in out and "'synchronize': 0" in out


_VALUE_READS = {"item", "tolist", "cpu", "numpy", "synchronize", "__bool__", "__float__", "__int__",
                "allclose", "equal", "nonzero", "any", "all"}


def test_instrumentation_source_reads_no_values():
    """Static audit of tensorscope/instrument/*.py: no call that reads tensor values, no printing.

    nonfinite.py, origin_walk.py and grad_sums.py read values by design (the sinks under every command, the
    origins under explain and --check-values, the engine's sums on a GPU only once a gradient check has failed),
    under a guard against the program's modes; test_tensorscope_reads_no_tensor_values runs a plain `run` and
    sees no read of theirs."""
    found = []
    for path in sorted((REPO / "tensorscope" / "instrument").glob("*.py")):
        if path.name in ("nonfinite.py", "origin_walk.py", "grad_sums.py"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in _VALUE_READS:
                found.append(f"{path.name}:{node.lineno} .{f.attr}()")
            if isinstance(f, ast.Name) and f.id in ("print", "float"):
                found.append(f"{path.name}:{node.lineno} {f.id}()")
    assert found == []


# --------------------------------------------------------------------------- on a GPU

SNIPPETS = sorted(p.name for p in SNIPPETS_DIR.glob("*.py"))


@pytest.fixture(scope="module")
def gpu_snippet_runs():
    with ThreadPoolExecutor(max_workers=4) as pool:
        futs = {s: (pool.submit(run_cli, "run", "--json", str(SNIPPETS_DIR / s)),
                    pool.submit(run_cli, "run", "--json", "--device", "cuda", str(SNIPPETS_DIR / s)))
                for s in SNIPPETS}
        return {s: (a.result(), b.result()) for s, (a, b) in futs.items()}


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("snippet", SNIPPETS)
def test_snippet_facts_are_the_same_on_cuda(gpu_snippet_runs, snippet):
    """Each snippet with its tensors created on CUDA (--device cuda) has the facts it has on the CPU."""
    (rc, _, err, doc), (rc_gpu, _, err_gpu, doc_gpu) = gpu_snippet_runs[snippet]
    assert doc is not None, err
    assert doc_gpu is not None, err_gpu
    assert rc == rc_gpu, err_gpu
    cpu_facts, gpu_facts = facts(doc), facts(doc_gpu)
    for key, f in cpu_facts.items():
        assert gpu_facts.get(key) == f, key
    assert diagnosis_summary(doc["diagnosis"]) == diagnosis_summary(doc_gpu["diagnosis"])
    assert [diagnosis_summary(h) for h in doc["hazards"]] == [diagnosis_summary(h) for h in doc_gpu["hazards"]]
    created_on = {t["device"] for t in doc_gpu["tensors"] if t["created"] and t["created"]["how"] in
                  ("tensor", "zeros", "ones", "randn", "rand", "arange", "full", "empty")}
    assert created_on <= {"cuda:0"}
    assert doc_gpu["notes"][0].startswith("--device cuda:")


@pytest.mark.cuda
@needs_gpu
@pytest.mark.parametrize("name", TWINS)
def test_cuda_program_on_gpu_matches_device_cpu(name):
    """The CUDA program on the GPU against the same program with --device cpu: the same facts for
    every tensor, except that a move to the GPU copies (own storage, own counter) where the CPU
    mapping returns the tensor itself."""
    rc, _, err, doc = run_cli("run", "--json", str(PROGRAMS / name))
    rc_cpu, _, err_cpu, doc_cpu = run_cli("run", "--json", "--device", "cpu", str(PROGRAMS / name))
    assert rc == rc_cpu, err
    moved = {e["tensor"] for e in doc["events"] if e["kind"] == "copy" and e.get("op") in ("to", "cuda")}
    moved_names = {tuple(t["names"]) for t in doc["tensors"] if t["id"] in moved}
    gpu, cpu = facts(doc), facts(doc_cpu)
    # unnamed tensors are keyed by id, and a move to the GPU makes a tensor more, so ids differ
    named = lambda keys: [k for k in keys if k.startswith("(") and k not in map(str, moved_names)]  # noqa: E731
    for key in cpu:
        if key in moved_names or isinstance(key, str):
            continue
        a, b = dict(gpu[key]), dict(cpu[key])
        for f in ("same_storage_as", "same_counter_as"):
            a[f], b[f] = named(a.get(f, [])), named(b.get(f, []))
        assert a == b, key
    assert diagnosis_summary(doc["diagnosis"]) == diagnosis_summary(doc_cpu["diagnosis"])
    if name == "placements.py":
        h = find_tensor(doc, "h")
        assert h["device"] == "cuda:0"
        assert len([t for t in doc["tensors"] if t["storage"] == h["storage"] and t["alive"]]) == 2  # h, d


@pytest.mark.cuda
@needs_gpu
def test_device_mismatch_diagnosis_on_gpu():
    prog = REPO / "tests" / "corpus" / "device_cuda_input_cpu_model.py"
    rc, _, err, doc = run_cli("explain", "--json", str(prog))
    assert rc == 1, err
    exc = doc["program"]["exception"]
    assert exc["type"] == "RuntimeError"
    assert "Expected all tensors to be on the same device" in exc["message"]
    assert doc["diagnosis"]["kind"] == "device-mismatch"


@pytest.mark.cuda
@needs_gpu
def test_device_cuda_puts_new_tensors_on_the_gpu_and_restores(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import torch\nx = torch.zeros(3)\ny = torch.tensor([1.0, 2.0], device='cpu')\n"
                    "print(x.device, y.device, torch.get_default_device())\n")
    rc, out, err, _ = run_cli("run", "--device", "cuda", "-o", str(tmp_path / "r.json"), str(prog))
    assert rc == 0, err
    assert out == "cuda:0 cpu cuda:0\n"
    from tensorscope.instrument import session

    tracker = session.new_tracker(None)
    with session.active(tracker, device="cuda"):
        assert torch.zeros(1).device.type == "cuda"
    assert torch.zeros(1).device.type == "cpu" and torch.get_default_device().type == "cpu"


@pytest.mark.cuda
@needs_gpu
def test_backward_on_worker_threads_is_attributed_to_the_backward_line():
    """CUDA backward runs on autograd worker threads; saved-tensor facts still point at user lines."""
    snippet = SNIPPETS_DIR / "data_write_silent_wrong_grad.py"
    # silent writes are explain's (run registers no saved-tensor hooks): exit 1, a hazard found
    rc, _, err, doc = run_cli("explain", "--json", "--device", "cuda", str(snippet))
    assert rc == 1 and doc["program"]["exit_status"] == 0, err
    hazard = doc["hazards"][0]
    assert hazard["kind"] == "silent-saved-tensor-write"
    assert hazard["backward"]["line"] == line_of(snippet, ".backward()")
    assert hazard["saved_by"]["line"] is not None
