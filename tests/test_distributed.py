"""torchrun and DistributedDataParallel: one report per rank, ranks in the JSON, DDP's failures explained.

One real torchrun launch (2 ranks, gloo, CPU, loopback only) shared by several asserts; the other
checks run single processes (a one-rank gloo group, or torchrun's environment variables alone).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from _cli import load_report, _env, line_of, run_many, validate_against_schema

REPO = Path(__file__).resolve().parents[1]
PACKAGE = str(REPO / "tensorscope") + "/"  # tensorscope's own code: no frame of it in a rank's traceback
PROGRAMS = REPO / "tests" / "programs"
PY = sys.executable
FORWARD = line_of(PROGRAMS / "ddp_unused.py", "loss = model(torch.randn(3, 4)).sum()")
TIMEOUT = 900  # guards a hang, not speed: a niced run on a loaded 2-core machine takes minutes
# The DDP buffer programs assert torch 2.13's versions: from 2.6 until pytorch/pytorch#175024, the forward's
# broadcast_buffers bumped the buffers' versions too (other version numbers, and the GAN pattern raises).
# The GPU machine lent to this project has an older torch; the project pins 2.13 (constraints.txt).
_TORCH = tuple(int(p) for p in re.findall(r"\d+", __import__("torch").__version__)[:2])
torch_2_13 = pytest.mark.skipif(_TORCH < (2, 13), reason="asserts torch 2.13's buffer versions under DDP")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def torchrun(tmp_path_factory):
    """`torchrun --nproc_per_node=2 -m tensorscope run -o OUT.json tests/programs/ddp_unused.py`."""
    out = tmp_path_factory.mktemp("torchrun")
    env = _env()
    env.update(MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    cmd = [PY, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", "-m", "tensorscope", "run", "-o", str(out / "OUT.json"),
           str(PROGRAMS / "ddp_unused.py")]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    return proc, out


@pytest.mark.slow
def test_torchrun_writes_one_report_per_rank(torchrun):
    proc, out = torchrun
    assert sorted(p.name for p in out.iterdir()) == ["OUT.rank0.json", "OUT.rank1.json"], proc.stderr[-2000:]
    for rank in (0, 1):
        doc = load_report((out / f"OUT.rank{rank}.json").read_text())
        validate_against_schema(doc)
        assert doc["distributed"] == {"rank": rank, "local_rank": rank, "world_size": 2, "backend": "gloo"}
        assert doc["program"]["exit_status"] == 1
        assert doc["diagnosis"]["kind"] == "ddp-unused-parameters"


@pytest.mark.slow
def test_torchrun_program_behaves_as_under_plain_torchrun(torchrun):
    proc, _ = torchrun
    import torch

    sys.path.insert(0, str(PROGRAMS))
    try:
        from ddp_unused import Net
    finally:
        sys.path.remove(str(PROGRAMS))
    torch.manual_seed(0)  # what each rank computes in its first step (DDP starts from rank 0's weights)
    loss = Net()(torch.randn(3, 4)).sum().item()
    # torchrun exits 1 when a rank fails; each rank's stdout line, and no report on stdout (-o)
    assert proc.returncode == 1
    # the two ranks print at the same moment into one pipe, so their lines may interleave (as under
    # plain torchrun): each rank's line once, and nothing else (no report on stdout with -o)
    out = proc.stdout.replace("\n", "")
    expected = [f"rank {r} step 0 loss {loss:.4f}" for r in (0, 1)]
    rest = out
    for e in expected:
        rest = rest.replace(e, "", 1)
    # torch 2.9.1's gloo prints each rank's connection on stdout, under plain torchrun too (measured; the two ranks'
    # characters interleave); 2.2.2, 2.13.0 and 2.15.0 print nothing there
    gloo = "".join(f"[Gloo] Rank {r} is connected to 1 peer ranks. Expected number of connected peer ranks is : 1"
                   for r in (0, 1))
    assert all(out.count(e) == 1 for e in expected) and sorted(rest) in ([], sorted(gloo)), proc.stdout
    error = "RuntimeError: Expected to have finished reduction in the prior iteration"
    where = f"  File \"{PROGRAMS / 'ddp_unused.py'}\", line {FORWARD}, in <module>"
    if "[rank0]: " in proc.stderr:  # torchrun tags each rank's lines with "[rankN]: " (not on 2.2.2)
        for rank in (0, 1):
            assert f"[rank{rank}]: {error}" in proc.stderr and f"[rank{rank}]: {where}" in proc.stderr
    else:  # untagged: each rank's traceback once
        assert proc.stderr.count(error) >= 2 and proc.stderr.count(where) >= 2, proc.stderr[-3000:]
    assert PACKAGE not in proc.stderr.split("Traceback", 1)[1].split("RuntimeError", 1)[0]


@pytest.mark.slow
def test_torchrun_rank0_names_the_unused_parameters_by_module_path(torchrun):
    proc, out = torchrun
    import torch

    sys.path.insert(0, str(PROGRAMS))
    try:
        from ddp_unused import Net
    finally:
        sys.path.remove(str(PROGRAMS))
    m = re.search(r"Parameter indices which did not receive grad for rank 0: ([\d ]+)", proc.stderr)
    indices = [int(i) for i in m[1].split()]
    names = [n for i, (n, p) in enumerate(Net().named_parameters()) if i in indices]
    assert names == ["aux.weight", "aux.bias"]  # what torch's own numbering points at
    d = json.loads((out / "OUT.rank0.json").read_text())["diagnosis"]
    for name in names:
        assert f"`{name}`" in d["explanation"]
    assert "`Net.forward`" in d["explanation"] and "`self.aux`" in d["explanation"]
    assert (d["culprit"]["line"], d["culprit"]["code"]) == (FORWARD, "loss = model(torch.randn(3, 4)).sum()")
    assert "m.aux.requires_grad_(False)" in d["fix"] and "find_unused_parameters=True" in d["fix"]


def _run(cmd, cwd, env=None):
    p = subprocess.run(cmd, cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=TIMEOUT)
    return p.returncode, p.stdout, p.stderr


def test_reentrant_checkpoint_under_ddp_is_explained(tmp_path):
    prog = str(PROGRAMS / "ddp_checkpoint_twice.py")
    report = tmp_path / "r.json"
    py, ts = run_many([("python", prog, free_port()), ("tensorscope", "run", "-o", report, prog, free_port())])
    assert ts[:3] == py
    name = re.search(r"Parameter at index \d+ with name ([\w.]+) has been marked as ready twice", py[2])[1]
    doc = load_report(report.read_text())
    validate_against_schema(doc)
    d = doc["diagnosis"]
    assert d["kind"] == "ddp-mark-ready-twice"
    assert f"`{name}`" in d["explanation"]
    assert d["culprit"]["code"] == "x = checkpoint(self.block, x, use_reentrant=True)"
    assert d["backward"]["code"] == "model(x).sum().backward()"
    assert "use_reentrant=False" in d["fix"]
    assert doc["distributed"] is None  # not under torchrun


def test_rank_files_and_terminal_labels_from_torchruns_environment(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import torch\nx = torch.ones(2)\ny = x.view(2)\nprint('out')\n")
    env = _env()
    env.update(RANK="1", LOCAL_RANK="1", WORLD_SIZE="2")
    with ThreadPoolExecutor(2) as pool:
        quiet = pool.submit(_run, [PY, "-m", "tensorscope", "run", str(prog)], tmp_path, env)
        loud = pool.submit(_run, [PY, "-m", "tensorscope", "run", "--all-ranks", str(prog)], tmp_path, env)
        quiet, loud = quiet.result(), loud.result()
    assert quiet == (0, "out\n", "")  # rank 1 prints no report by default
    assert loud[0] == 0 and loud[1].startswith("out\nrank 1\n") and "clean: no backward cal" in loud[1]
    rc, out, err = _run([PY, "-m", "tensorscope", "run", "-o", "r.txt", str(prog)], tmp_path, env)
    assert (rc, out, err) == (0, "out\n", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.py", "r.rank1.txt"]


# --- DDP's broadcasts writing a tensor saved for backward (tests/programs/ddp_buffers.py) ----------------

BUFFERS = PROGRAMS / "ddp_buffers.py"
BUILT = line_of(BUFFERS, "model = DistributedDataParallel(disc)")
FORWARD_DDP = line_of(BUFFERS, "    fake = model(torch.randn(3, 4)).mean()")
BACKWARD = line_of(BUFFERS, "(fake - real).backward()")
SAVED = line_of(BUFFERS, "return self.bn(self.body(x))")
STALE = ("RuntimeError: one of the variables needed for gradient computation has been modified by an inplace "
         "operation: [torch.FloatTensor [4]] is at version 2; expected version 1 instead.")


def _buffers_module():
    sys.path.insert(0, str(PROGRAMS))
    try:
        import ddp_buffers
    finally:
        sys.path.remove(str(PROGRAMS))
    return ddp_buffers


def _expected_line(rank: int) -> str:
    """What rank RANK prints: its own module scores `real`; `fake` runs rank 0's weights, broadcast by DDP."""
    import torch

    Discriminator = _buffers_module().Discriminator
    torch.manual_seed(0)
    rank0 = Discriminator().eval()
    torch.manual_seed(rank)
    own = Discriminator().eval()
    real = own(torch.randn(3, 4)).mean().item()
    fake = rank0(torch.randn(3, 4)).mean().item()
    return f"rank {rank} real {real:.4f} fake {fake:.4f}"


def _assert_ddp_named_as_writer(d: dict) -> None:
    assert d["kind"] == "inplace-modified-saved-tensor"
    assert (d["culprit"]["line"], d["culprit"]["code"]) == (BUILT, "model = DistributedDataParallel(disc)")
    assert d["culprit"]["library"] == "torch/nn/parallel/distributed.py:__init__"
    assert "building DistributedDataParallel broadcasts rank 0's parameters and buffers" in d["explanation"]
    assert "bumping its version 1 -> 2" in d["explanation"]
    assert (d["backward"]["line"], d["backward"]["code"]) == (BACKWARD, "(fake - real).backward()")
    assert d["saved_by"]["node"] == "NativeBatchNormBackward0"
    # the buffer, by module path under both of the program's names (the module and the DDP wrapper)
    assert {"disc.bn.running_mean", "model.module.bn.running_mean"} <= set(d["tensor"]["names"])
    assert (d["tensor"]["version_at_save"], d["tensor"]["version_now"]) == (1, 2)  # the error's own numbers
    assert "before the first forward" in d["fix"] and "`disc.bn.running_mean`" in d["fix"]


def _broadcast_events(doc: dict, line: int, what: str) -> list[dict]:
    return [e for e in doc["events"] if e["kind"] == "write" and e["line"] == line and e["op"].startswith(what)]


@pytest.fixture(scope="module")
def torchrun_buffers(tmp_path_factory):
    """`torchrun --nproc_per_node=2 -m tensorscope run -o B.json tests/programs/ddp_buffers.py`."""
    out = tmp_path_factory.mktemp("torchrun_buffers")
    env = _env()
    env.update(MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    cmd = [PY, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", "-m", "tensorscope", "run", "-o", str(out / "B.json"), str(BUFFERS)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    return proc, out


@pytest.mark.slow
@torch_2_13
def test_torchrun_ddp_construction_broadcast_is_the_writer_on_every_rank(torchrun_buffers):
    proc, out = torchrun_buffers
    assert sorted(p.name for p in out.iterdir()) == ["B.rank0.json", "B.rank1.json"], proc.stderr[-2000:]
    # the program behaves as under plain torchrun: each rank's line (computed here with torch), the
    # version error on each rank at the backward line, and no tensorscope frame in the traceback
    assert proc.returncode == 1
    text = proc.stdout.replace("\n", "")
    expected = [_expected_line(r) for r in (0, 1)]
    assert all(text.count(e) == 1 for e in expected) and len(text) == sum(map(len, expected)), proc.stdout
    for rank in (0, 1):
        assert f"[rank{rank}]: {STALE}" in proc.stderr
        assert f"[rank{rank}]:   File \"{BUFFERS}\", line {BACKWARD}, in <module>" in proc.stderr
    assert PACKAGE not in proc.stderr.split("Traceback", 1)[1].split("RuntimeError", 1)[0]
    for rank in (0, 1):
        doc = load_report((out / f"B.rank{rank}.json").read_text())
        validate_against_schema(doc)
        assert doc["distributed"]["rank"] == rank
        _assert_ddp_named_as_writer(doc["diagnosis"])
        # what torch did on this rank: building DDP moved the version of both parameters and all three
        # buffers (rank 0 too); the forward's broadcast_buffers wrote the buffers and kept their versions
        built = _broadcast_events(doc, BUILT, "DistributedDataParallel construction")
        assert len(built) == 5 and all((e["version_before"], e["version_after"]) == (1, 2) for e in built)
        synced = _broadcast_events(doc, FORWARD_DDP, "DistributedDataParallel broadcast_buffers (from rank 0)")
        assert len(synced) == 3 and all(e["version_before"] == e["version_after"] == 2 for e in synced)


@pytest.fixture(scope="module")
def buffers_alone(tmp_path_factory):
    """ddp_buffers.py in a one-process gloo group: python, run -o, explain -o; and its `gan` mode."""
    out = tmp_path_factory.mktemp("buffers_alone")
    # forked runs (tests/_cli.py: run_many): the program's output and exit status, not how its process starts
    jobs = {
        "python": ("python", BUFFERS, free_port()),
        "run": ("tensorscope", "run", "-o", out / "run.json", BUFFERS, free_port()),
        "explain": ("tensorscope", "explain", "-o", out / "explain.json", BUFFERS, free_port()),
        "gan_python": ("python", BUFFERS, free_port(), "gan"),
        "gan_explain": ("tensorscope", "explain", "-o", out / "gan.json", BUFFERS, free_port(), "gan"),
    }
    results = {k: tuple(r[:3]) for k, r in zip(jobs, run_many(list(jobs.values())))}
    docs = {k: load_report((out / f"{k}.json").read_text()) for k in ("run", "explain", "gan")}
    return results, docs


@torch_2_13
def test_ddp_construction_broadcast_named_by_run_and_explain(buffers_alone):
    results, docs = buffers_alone
    py = results["python"]
    assert py[0] == 1 and STALE in py[2] and py[1] == _expected_line(0) + "\n"
    assert results["run"] == py and results["explain"] == py  # output, errors and exit status as python's
    for doc in docs["run"], docs["explain"]:
        validate_against_schema(doc)
        _assert_ddp_named_as_writer(doc["diagnosis"])
    # explain's saved-tensor hooks know the forward line that saved the buffer; run's graph walk does not
    assert docs["explain"]["diagnosis"]["saved_by"]["line"] == SAVED


@torch_2_13
def test_ddp_forward_broadcast_into_saved_buffers_is_no_error_and_not_the_hazards_writer(buffers_alone):
    """A GAN discriminator called on two batches before one backward (torch 2.13 allows it); then a step
    whose second call is in training mode: BatchNorm's kernel changes the running statistics the first call
    saved without a version bump (wrong gradients), while DDP's broadcast between them copied equal values."""
    results, docs = buffers_alone
    # the program's output as python's; explain exits 1: a hazard was found (README, exit codes)
    assert results["gan_python"][0] == 0 and results["gan_explain"] == (1, *results["gan_python"][1:])
    doc = docs["gan"]
    validate_against_schema(doc)
    assert doc["diagnosis"] is None
    second = line_of(BUFFERS, "d_fake = model(torch.randn(3, 4)).mean()")
    synced = _broadcast_events(doc, second, "DistributedDataParallel broadcast_buffers (from rank 0)")
    assert len(synced) == 3 and all(e["version_before"] == e["version_after"] for e in synced)
    assert all(e["saved_hits"] == [] for e in synced)  # the bytes written are those saved: no saved tensor hit
    # the 4th forward's broadcast (after the first 3, recorded in full) is recorded only for the buffers
    # a saved tensor lies on: running_mean and running_var, saved by the 3rd; not num_batches_tracked
    fourth = line_of(BUFFERS, "d_fake = model(torch.randn(3, 4)).pow(2).mean()")
    assert len(_broadcast_events(doc, fourth, "DistributedDataParallel broadcast_buffers")) == 2
    mixed = line_of(BUFFERS, "(d_fake + d_real).backward()")
    assert sorted(n for h in doc["hazards"] for n in h["tensor"]["names"]) == [
        "model.module.bn.running_mean", "model.module.bn.running_var"]
    for h in doc["hazards"]:
        assert h["kind"] == "silent-saved-tensor-write" and h["culprit"] is None
        assert (h["saved_by"]["line"], h["backward"]["line"]) == (SAVED, mixed)
        assert "BatchNorm's kernel" in h["explanation"] and "DistributedDataParallel" not in h["explanation"]


def test_forward_broadcast_that_bumps_versions_is_explained_as_ddps(tmp_path):
    """torch 2.6 until the fix of pytorch/pytorch#175024 bumped the buffers' versions in the forward's
    broadcast (the GAN error: a discriminator called twice before backward); 2.13 does not, so this reads
    hand-built records of what such a run records."""
    from tensorscope.kinds import inplace_modified_saved_tensor as inplace
    from tensorscope.kinds._base import Evidence

    prog = tmp_path / "gan.py"
    prog.write_text("d_real = model(real).mean()\nd_fake = model(fake).mean()\n(d_fake - d_real).backward()\n")
    write = {"op": "DistributedDataParallel broadcast_buffers (from rank 0)", "file": str(prog), "line": 2,
             "segment": "model(fake)", "alias": "model(fake)", "tensor": "t3", "bumped": True,
             "library": "torch/nn/parallel/distributed.py:_sync_buffers", "version_before": 2, "version_after": 3,
             "grad_enabled": False}
    saved = {"tensor": "t3", "version_at_save": 2, "version_now": 3, "saved_file": str(prog), "saved_line": 1,
             "node": "NativeBatchNormBackward0", "writes": [write], "silent": [], "from": "graph"}
    failure = {"where": "backward", "file": str(prog), "line": 3, "saved": saved,
               "exception_type": "RuntimeError", "message": "one of the variables ... modified by an inplace operation"}
    tensor = {"id": "t3", "names": ["model.module.bn.running_mean"]}
    ev = Evidence(doc={}, failure=failure, saved_failure=saved, hazards=[], backwards=[], node_lines={},
                  created={}, names={}, exception=None, by_id={"t3": tensor})
    d = inplace.explain(ev)
    assert (d["culprit"]["line"], d["culprit"]["code"]) == (2, "d_fake = model(fake).mean()")
    assert ("Line 2 (`d_fake = model(fake).mean()`) then wrote into it: DistributedDataParallel's forward broadcasts "
            "rank 0's buffers into the module in place before running it (`broadcast_buffers=True`, the default), "
            "bumping its version 2 -> 3.") in d["explanation"]
    assert "`model.module.bn.running_mean`" in d["explanation"]
    assert "concatenate the batches" in d["fix"] and "`broadcast_buffers=False`" in d["fix"]
    assert "running statistics do not change" in d["fix"]


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.cuda
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU (nccl)")
def test_ddp_construction_broadcast_on_the_gpu_with_syncbatchnorm(tmp_path):
    """ddp_buffers.py on cuda:0 (nccl, one GPU, SyncBatchNorm): DDP named as the writer as on the CPU,
    and the GAN pattern clean apart from BatchNorm's own training-mode writes."""
    jobs = {
        "python": [PY, str(BUFFERS), str(free_port()), "cuda"],
        "run": [PY, "-m", "tensorscope", "run", "-o", str(tmp_path / "run.json"), str(BUFFERS), str(free_port()),
                "cuda"],
        "explain": [PY, "-m", "tensorscope", "explain", "-o", str(tmp_path / "explain.json"), str(BUFFERS),
                    str(free_port()), "cuda"],
        "gan_python": [PY, str(BUFFERS), str(free_port()), "gan", "cuda"],
        "gan_explain": [PY, "-m", "tensorscope", "explain", "-o", str(tmp_path / "gan.json"), str(BUFFERS),
                        str(free_port()), "gan", "cuda"],
    }
    # NCCL's exit warning carries a time stamp: scrubbed on every side
    stamp = re.compile(r"\[W\d{4} \d\d:\d\d:\d\d\.\d+ ")
    results = {k: (rc, out, stamp.sub("[W", err)) for k, cmd in jobs.items() for rc, out, err in [_run(cmd, REPO)]}
    py = results["python"]
    assert py[0] == 1 and "modified by an inplace operation" in py[2], py[2][-2000:]
    assert results["run"] == py and results["explain"] == py
    for k in ("run", "explain"):
        doc = load_report((tmp_path / f"{k}.json").read_text())
        validate_against_schema(doc)
        d = doc["diagnosis"]
        assert d["kind"] == "inplace-modified-saved-tensor", d
        assert (d["culprit"]["line"], d["culprit"]["code"]) == (BUILT, "model = DistributedDataParallel(disc)")
        assert "building DistributedDataParallel broadcasts rank 0's parameters and buffers" in d["explanation"]
        assert "disc.bn.running_mean" in d["tensor"]["names"]
    gan = results["gan_python"]
    if gan[0] != 0 and "is at version 4; expected version 3" in gan[2]:
        # torch before the fix of pytorch/pytorch#175024 (2.11 on the H100 this was run on) raises in
        # the GAN pattern itself: the forward broadcast bumps the buffer's version. Then tensorscope
        # must only behave as python does.
        assert results["gan_explain"][1:] == gan[1:]
        return
    assert gan[0] == 0, gan[2][-2000:]
    assert results["gan_explain"][1:] == gan[1:]
    doc = load_report((tmp_path / "gan.json").read_text())
    assert doc["diagnosis"] is None
    second = line_of(BUFFERS, "d_fake = model(torch.randn(3, 4)).mean()")
    synced = _broadcast_events(doc, second, "DistributedDataParallel broadcast_buffers (from rank 0)")
    assert synced and all(e["version_before"] == e["version_after"] and e["saved_hits"] == [] for e in synced)
    assert all("DistributedDataParallel" not in h["explanation"] for h in doc["hazards"])


def test_forward_broadcast_that_changes_a_saved_buffers_bytes_is_a_hazard_naming_ddp(tmp_path):
    """On a rank whose buffers drifted from rank 0's after a forward saved them, the next forward's
    broadcast copies other values in at the same version: explain's checksum sees the change. Read
    here from hand-built records (a 2-rank explain launch would be needed to make it for real)."""
    from tensorscope.kinds import silent_saved_tensor_write as silent
    from tensorscope.kinds._base import Evidence

    prog = tmp_path / "drift.py"
    prog.write_text("a = model(x).mean()\nb = model(y).mean()\n(a + b).backward()\n")
    write = {"op": "DistributedDataParallel broadcast_buffers (from rank 0)", "file": str(prog), "line": 2,
             "segment": "model(y)", "alias": "model(y)", "tensor": "t3", "bumped": False,
             "library": "torch/nn/parallel/distributed.py:_sync_buffers", "version_before": 2, "version_after": 2}
    hazard = {"tensor": "t3", "version_at_save": 2, "version_now": 2, "saved_file": str(prog), "saved_line": 1,
              "node": "NativeBatchNormBackward0", "writes": [write], "backward": {"file": str(prog), "line": 3}}
    tensor = {"id": "t3", "names": ["model.module.bn.running_mean"]}
    ev = Evidence(doc={}, failure=None, saved_failure=None, hazards=[hazard], backwards=[], node_lines={},
                  created={}, names={}, exception=None, by_id={"t3": tensor})
    h = silent.explain(ev, hazard)
    assert h["kind"] == "silent-saved-tensor-write"
    assert (h["culprit"]["line"], h["culprit"]["code"]) == (2, "b = model(y).mean()")
    assert "ran DistributedDataParallel, whose broadcast copied rank 0's values" in h["explanation"]
    assert "`broadcast_buffers=False`" in h["fix"] and ".data" not in h["fix"]
