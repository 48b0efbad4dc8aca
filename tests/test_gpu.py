"""Checks that need a real CUDA GPU; every test here skips cleanly without one.

- torchrun with NCCL, one rank per GPU: per-rank reports, the `distributed` field, DDP's failure
  explained, and the program behaving as under plain torchrun;
- the hook-free `run` diagnosis and `explain` of a version error on tensors that live on the GPU
  (backward runs on the device's autograd worker thread);
- `run --check-values` on the GPU: saved tensors fingerprinted without a host synchronisation;
- SyncBatchNorm's synchronising path (two ranks on one GPU, gloo): the running statistics it writes
  without a version bump, found by `explain` on every rank.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from _cli import load_report, _env, line_of, run_cli, run_python, validate_against_schema

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = REPO / "tests" / "programs_cuda"
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(*args: str, cwd: Path, nproc: int = 1) -> subprocess.CompletedProcess:
    env = _env()
    env.update(MASTER_ADDR="127.0.0.1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--master_addr=127.0.0.1",
           f"--master_port={_free_port()}", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def nccl_runs(tmp_path_factory):
    """The NCCL program under plain torchrun and under `torchrun -m tensorscope run -o OUT.json`."""
    out = tmp_path_factory.mktemp("nccl")
    prog = str(PROGRAMS / "ddp_unused_nccl.py")
    plain = _torchrun(prog, cwd=REPO)
    ts = _torchrun("-m", "tensorscope", "run", "-o", str(out / "OUT.json"), prog, cwd=REPO)
    return plain, ts, out


def test_nccl_torchrun_report_per_rank_and_ddp_failure_explained(nccl_runs):
    plain, ts, out = nccl_runs
    assert sorted(p.name for p in out.iterdir()) == ["OUT.rank0.json"], ts.stderr[-3000:]
    doc = load_report((out / "OUT.rank0.json").read_text())
    validate_against_schema(doc)
    assert doc["distributed"] == {"rank": 0, "local_rank": 0, "world_size": 1, "backend": "nccl"}
    assert doc["program"]["exit_status"] == 1
    d = doc["diagnosis"]
    assert d["kind"] == "ddp-unused-parameters"
    # the parameters torch itself numbers in its message, by their module path
    assert "`aux.weight`" in d["explanation"] and "`aux.bias`" in d["explanation"]
    forward = line_of(PROGRAMS / "ddp_unused_nccl.py", "loss = model(torch.randn(3, 4, device=device)).sum()")
    assert d["culprit"]["line"] == forward


def test_nccl_program_behaves_as_under_plain_torchrun(nccl_runs):
    plain, ts, _ = nccl_runs
    assert ts.returncode == plain.returncode == 1
    assert ts.stdout == plain.stdout
    assert "Expected to have finished reduction in the prior iteration" in ts.stderr
    def tail(text):  # the rank's traceback, without torch's time-stamped warning lines (torchrun's
        # own summary names its entry point, `tensorscope` under `torchrun -m tensorscope`)
        text = text.split("Traceback (most recent call last):", 1)[1]
        return [line for line in text.splitlines()
                if line.startswith("[rank0]:") and not re.search(r"\d\d:\d\d:\d\d\.\d+", line)]

    assert tail(ts.stderr) == tail(plain.stderr)


@pytest.mark.parametrize("command", ["run", "explain"])
def test_version_error_on_the_gpu_is_pinpointed(tmp_path, command):
    prog = PROGRAMS / "inplace_saved.py"
    rc_py, out_py, err_py = run_python(prog)
    rc, out, err, _ = run_cli(command, "-o", str(tmp_path / "r.json"), str(prog))
    assert (rc, out, err) == (rc_py, out_py, err_py)  # the program's own error, byte for byte
    # 2.13 names the forward op ("of Sigmoid"), earlier releases the node ("of SigmoidBackward0")
    assert re.search(r"torch\.cuda\.FloatTensor \[3\]\], which is output 0 of Sigmoid(Backward0)?, is at version 1", err)
    d = json.loads((tmp_path / "r.json").read_text())["diagnosis"]
    assert d["kind"] == "inplace-modified-saved-tensor"
    assert d["culprit"]["line"] == line_of(prog, "alias.zero_()") and d["culprit"]["alias"] == "alias"
    assert d["backward"]["line"] == line_of(prog, "out.sum().backward()")
    if command == "explain":  # the saving line is the hooks' fact
        assert d["saved_by"]["line"] == line_of(prog, "out = a.sigmoid()")


def test_check_values_finds_a_silent_write_on_the_gpu(tmp_path):
    prog = tmp_path / "silent.py"
    prog.write_text(
        "import torch\n"
        "w = torch.tensor([0.5, -1.0, 2.0], device='cuda', requires_grad=True)\n"
        "y = w.exp()\n"
        "y.data.mul_(0)\n"
        "y.sum().backward()\n"
        "print(w.grad.tolist())\n"
    )
    rc_py, out_py, err_py = run_python(prog)
    rc, out, err, _ = run_cli("run", "--check-values", "-o", str(tmp_path / "r.json"), str(prog))
    assert (rc, out, err) == (rc_py, out_py, err_py)
    assert json.loads(out_py) == [0.0, 0.0, 0.0]  # torch's wrong gradient: exp's saved output was zeroed
    doc = load_report((tmp_path / "r.json").read_text())
    [hazard] = doc["hazards"]
    assert hazard["kind"] == "silent-saved-tensor-write"
    assert hazard["culprit"]["line"] == 4


def test_syncbatchnorm_sync_path_on_two_ranks_writes_saved_statistics(tmp_path):
    """Two ranks share the GPU (gloo carries SyncBatchNorm's all_gather), so the module takes its sync path
    (torch.batch_norm_gather_stats_with_counts), which updates running_mean/var in place without a version
    bump: an eval-mode output's backward after a training-mode forward silently uses the new statistics."""
    prog = str(PROGRAMS / "syncbn_two_ranks.py")
    plain = _torchrun(prog, cwd=REPO, nproc=2)
    explain = _torchrun("-m", "tensorscope", "explain", "-o", str(tmp_path / "E.json"), prog, cwd=REPO, nproc=2)
    run = _torchrun("-m", "tensorscope", "run", "-o", str(tmp_path / "R.json"), prog, cwd=REPO, nproc=2)
    assert plain.returncode == 0 and run.returncode == 0, plain.stderr[-3000:] + run.stderr[-3000:]
    # the two ranks share the pipe and their prints interleave: compare what each rank printed
    printed = re.compile(r"rank (\d) (grad [\d.]+ running_mean [\d.]+)")
    lines = sorted(printed.findall(plain.stdout))
    # both ranks print the same synchronised statistics: the sync path ran (unsynchronised, they differ)
    assert [r for r, _ in lines] == ["0", "1"] and lines[0][1] == lines[1][1], plain.stdout
    assert sorted(printed.findall(run.stdout)) == lines and sorted(printed.findall(explain.stdout)) == lines
    assert explain.returncode != 0  # explain exits 1 on a hazard (README, exit codes); torchrun passes it on
    saved = line_of(prog, "scored = model(torch.randn(8, 4, device=device)).pow(2).mean()")
    backward = line_of(prog, "scored.backward()")
    for rank in (0, 1):
        doc = load_report((tmp_path / f"E.rank{rank}.json").read_text())
        validate_against_schema(doc)
        assert doc["distributed"]["world_size"] == 2 and doc["diagnosis"] is None
        assert sorted(h["tensor"]["names"][0] for h in doc["hazards"]) == ["net.1.running_mean", "net.1.running_var"]
        for h in doc["hazards"]:
            assert h["kind"] == "silent-saved-tensor-write"
            assert "model.module.1." + h["tensor"]["names"][0].split(".")[-1] in h["tensor"]["names"]
            assert (h["saved_by"]["line"], h["backward"]["line"]) == (saved, backward)
            assert "BatchNorm's kernel" in h["explanation"]
        # run without --check-values registers no hooks and reports no silent write (README)
        assert json.loads((tmp_path / f"R.rank{rank}.json").read_text())["hazards"] == []


def test_nonfinite_origins_on_the_gpu(tmp_path):
    """Issue 21 on CUDA (kinds.md, "Non-finite values"): the loss's check is read at once, so a forward origin
    (log of a 0 at step 35, past one batch of 32 flags) is named at its op, line and step; gradient hooks do
    not go on for a backward on the GPU, so sqrt's infinite gradient at 0 is reported at the gradient sink with
    no node, where the same program on the CPU names SqrtBackward0. Output and exit status as under python."""
    prog = PROGRAMS / "nonfinite_cuda.py"
    for case, device in [("forward", "cuda"), ("backward", "cuda"), ("backward", "cpu")]:
        rc_py, out_py, err_py = run_python(prog, case, device)
        report = tmp_path / f"{case}_{device}.json"
        rc, out, err, _ = run_cli("explain", "-o", str(report), str(prog), case, device)
        assert (out, err) == (out_py, err_py) and rc_py == 0 and rc == 1  # explain exits 1 on a hazard
        lines = dict(line.split(" ", 1) for line in out_py.splitlines())
        doc = load_report(report.read_text())
        (h,) = [h for h in doc["hazards"] if h["kind"] == "silent-non-finite-value"]
        nf = h["nonfinite"]
        if case == "forward":
            assert lines["30"].split()[0] != "inf" and lines["35"].split()[0] == "inf"  # torch: -log(0) at step 35
            assert (h["culprit"]["line"], nf["op"], nf["phase"], nf["step"]) == \
                (line_of(prog, "loss = -torch.log("), "aten.log", "forward", 35)
        else:
            assert lines["0"].split()[1] == "False"  # torch: the gradient is not finite from the first step
            assert nf["sink"]["what"] in ("grad", "parameter") and nf["sink"]["step"] == 0  # after backward or step()
            if device == "cpu":
                assert (nf["node"], nf["phase"], h["culprit"]["line"]) == \
                    ("SqrtBackward0", "backward", line_of(prog, "dist = torch.sqrt("))
            else:  # the documented limit: no node hooks on a GPU backward
                assert nf["node"] is None and "No op was pinned" in h["explanation"]
