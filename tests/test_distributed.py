"""torchrun and DistributedDataParallel: one report per rank, ranks in the JSON, DDP's failures explained.

One real torchrun launch (2 ranks, gloo, CPU, loopback only) shared by several asserts; the other
checks run single processes (a one-rank gloo group, or torchrun's environment variables alone).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from _cli import _env, line_of, validate_against_schema

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = REPO / "tests" / "programs"
PY = sys.executable
FORWARD = line_of(PROGRAMS / "ddp_unused.py", "loss = model(torch.randn(3, 4)).sum()")
TIMEOUT = 180


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
        doc = json.loads((out / f"OUT.rank{rank}.json").read_text())
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
    assert all(out.count(e) == 1 for e in expected) and len(out) == sum(map(len, expected)), proc.stdout
    for rank in (0, 1):
        assert f"[rank{rank}]: RuntimeError: Expected to have finished reduction in the prior iteration" in proc.stderr
        assert f"[rank{rank}]:   File \"{PROGRAMS / 'ddp_unused.py'}\", line {FORWARD}, in <module>" in proc.stderr
    assert "tensorscope/" not in proc.stderr.split("Traceback", 1)[1].split("RuntimeError", 1)[0]


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
    with ThreadPoolExecutor(2) as pool:
        py = pool.submit(_run, [PY, prog, str(free_port())], REPO)
        ts = pool.submit(_run, [PY, "-m", "tensorscope", "run", "-o", str(report), prog, str(free_port())], REPO)
        py, ts = py.result(), ts.result()
    assert ts == py
    name = re.search(r"Parameter at index \d+ with name ([\w.]+) has been marked as ready twice", py[2])[1]
    doc = json.loads(report.read_text())
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
