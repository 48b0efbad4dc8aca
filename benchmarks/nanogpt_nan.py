"""Real training code with a NaN injected, run as a user would: karpathy/nanoGPT under `tensorscope explain`.

    python benchmarks/nanogpt_nan.py NANOGPT_DIR [--lr 3.0]

NANOGPT_DIR is a checkout of https://github.com/karpathy/nanoGPT (not part of this repository; the
script exits 0 with a note when it is absent). The checkout is copied to a temporary folder, given a
synthetic character data set in place of the downloaded Shakespeare (`data/shakespeare_char/`:
`train.bin`, `val.bin`, `meta.pkl`, 65 symbols) and one injected bug: `model.py`'s
`F.cross_entropy(logits, targets)` becomes `-torch.log(F.softmax(logits)).gather(...)`, the
log-of-a-softmax that public NaN reports keep showing; a learning rate warmed up to 3.0 saturates the
softmax after a few steps, so a probability is exactly 0 and the loss is inf.

The truth is torch's: plain `python train.py` prints the loss of each iteration (the first inf or
nan one is the step), and the fixed twin (the same run with `F.cross_entropy`) stays finite. Then
`python -m tensorscope explain --json train.py ...` must name `aten.log` in the forward pass, at the
injected line of model.py, at that step, with zeros among its input's values; the twin must get no
non-finite finding. Prints one JSON line of what it found; exit status 1 when a check fails.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CROSS_ENTROPY = "loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)"
INJECTED = ("probs = F.softmax(logits.view(-1, logits.size(-1)), dim=-1)\n"
            "{indent}loss = -torch.log(probs).gather(1, targets.view(-1, 1)).mean()  # injected: log of a softmax")


def args_for(lr: float) -> list[str]:
    return ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_interval=1000",
            "--eval_iters=1", "--log_interval=1", "--block_size=32", "--batch_size=8", "--n_layer=2", "--n_head=2",
            "--n_embd=32", "--max_iters=8", "--lr_decay_iters=8", "--warmup_iters=5", "--dropout=0.0",
            f"--learning_rate={lr}", "--grad_clip=0.0"]


def prepare(src: Path, dst: Path, inject: bool) -> int | None:
    """Copy the checkout, write the data, inject the bug; the injected line's number (None: not injected)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".git", "out-*"))
    import numpy as np

    rng = np.random.default_rng(0)
    data_dir = dst / "data" / "shakespeare_char"
    data_dir.mkdir(parents=True, exist_ok=True)
    base = np.tile(np.arange(65, dtype=np.uint16), 2000)
    data = np.where(rng.random(base.size) < 0.3, rng.integers(0, 65, base.size), base).astype(np.uint16)
    n = int(0.9 * len(data))
    data[:n].tofile(data_dir / "train.bin")
    data[n:].tofile(data_dir / "val.bin")
    with open(data_dir / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": 65, "itos": {i: chr(48 + i) for i in range(65)},
                     "stoi": {chr(48 + i): i for i in range(65)}}, f)
    if not inject:
        return None
    model = dst / "model.py"
    text = model.read_text()
    m = re.search(r"^(?P<indent>[ \t]*)" + re.escape(CROSS_ENTROPY), text, re.M)
    if m is None:
        raise SystemExit("model.py has no F.cross_entropy line to inject into (a newer nanoGPT?)")
    text = text[:m.start()] + m["indent"] + INJECTED.format(indent=m["indent"]) + text[m.end():]
    model.write_text(text)
    return text[:m.start()].count("\n") + 2  # the loss line, after the softmax line


def first_nonfinite_iter(stdout: str) -> int | None:
    for m in re.finditer(r"^iter (\d+): loss (\S+),", stdout, re.M):
        if m[2] in ("nan", "inf", "-inf"):
            return int(m[1])
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("nanogpt", type=Path)
    ap.add_argument("--lr", type=float, default=3.0)
    a = ap.parse_args()
    if not (a.nanogpt / "train.py").exists():
        print(f"no nanoGPT checkout at {a.nanogpt}: nothing to do", file=sys.stderr)
        return 0
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", TENSORSCOPE_NO_PROGRESS="1")
    found: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, inject in (("injected", True), ("fixed", False)):
            work = Path(tmp) / name
            line = prepare(a.nanogpt, work, inject)
            cmd = ["train.py", *args_for(a.lr)]
            ref = subprocess.run([sys.executable, *cmd], cwd=work, env=env, capture_output=True, text=True)
            ts = subprocess.run([sys.executable, "-m", "tensorscope", "explain", "--json", *cmd], cwd=work, env=env,
                                capture_output=True, text=True)
            doc = json.loads(ts.stdout)
            hazards = [h for h in doc["hazards"] if "non-finite" in h["kind"]]
            findings = hazards + ([doc["diagnosis"]] if doc["diagnosis"] else [])
            found[name] = {"python_exit": ref.returncode, "explain_exit_status": doc["program"]["exit_status"],
                           "truth_step": first_nonfinite_iter(ref.stdout), "injected_line": line,
                           "findings": [{"kind": h["kind"], "culprit": h["culprit"],
                                         **{k: (h.get("nonfinite") or {}).get(k) for k in ("op", "phase", "step", "value")},
                                         "input_zeros": [i.get("zeros") for i in (h.get("nonfinite") or {}).get("inputs", [])]}
                                        for h in findings]}
    inj, fixed = found["injected"], found["fixed"]
    checks = {
        "python exits 0, explain keeps it": inj["python_exit"] == 0 == inj["explain_exit_status"],
        "torch: the injected run goes non-finite, the twin does not": inj["truth_step"] is not None
        and fixed["truth_step"] is None,
        "one finding on the injected run": len(inj["findings"]) == 1,
        "origin: aten.log, forward, the injected line, the step": bool(inj["findings"]) and (
            inj["findings"][0]["op"], inj["findings"][0]["phase"], inj["findings"][0]["culprit"]["file"],
            inj["findings"][0]["culprit"]["line"], inj["findings"][0]["step"]) == (
            "aten.log", "forward", "model.py", inj["injected_line"], inj["truth_step"]),
        "the twin gets no finding": fixed["findings"] == [],
    }
    print(json.dumps({"found": found, "checks": checks}))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
