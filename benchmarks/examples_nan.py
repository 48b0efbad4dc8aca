"""Real training code with a NaN injected, run as a user would: four programs of pytorch/examples under
`tensorscope explain`.

    python benchmarks/examples_nan.py EXAMPLES_DIR [--case NAME ...] [--tree TENSORSCOPE_TREE]

EXAMPLES_DIR is a checkout of https://github.com/pytorch/examples (not part of this repository; the script exits 0
with a note when it is absent). Each case copies one example's folder to a temporary folder, injects one bug
that public NaN reports keep showing, shrinks the run to a few CPU steps with the example's own options, and runs
it twice, as plain `python` and under `tensorscope explain --json`, beside its fixed twin (the example as it is):
- `vae_sqrt_logvar` (vae/main.py): the reparameterisation takes `torch.sqrt(logvar)` for the standard deviation,
  as if the encoder gave a variance (the original: `torch.exp(0.5*logvar)`): `sqrt` of a negative, forward; the
  program raises in `binary_cross_entropy` ("between 0 and 1") at its first batch.
- `word_lm_log_of_softmax` (word_language_model/model.py): the decoder returns `torch.log(F.softmax(...))`
  in place of `F.log_softmax(...)`; with a learning rate of 400 the softmax saturates after a few batches,
  a probability is exactly 0 and the NLL loss is inf: `log`, forward.
- `dcgan_bce_by_hand` (dcgan/main.py): `nn.BCELoss()` (which clamps its log at -100) written by hand,
  `-(y * log(p) + (1 - y) * log(1 - p))`; with a learning rate of 0.05 the discriminator's sigmoid reaches
  exactly 1.0 and `log(1 - p)` is -inf (times a label of 0: NaN): `log`, forward.
- `mnist_standardize_unnamed` (mnist/main.py): a helper `standardize(x)` (each image to zero mean and unit std,
  no eps) is added and `Net.forward` calls `self.conv1(standardize(x))`; the stub's data set holds one blank image
  (index 100): its std is 0, the division is NaN inside the helper, whose result goes unnamed into the
  convolution: `div`, forward, at the helper's line.
The examples' datasets are not downloaded: `torchvision` (which the VAE and the DCGAN import for MNIST,
FakeData, ToTensor and save_image) is replaced in the copy by a stub of those names that yields seeded random
images, and the language model's `train.txt` (absent from some snapshots) is written from the first 40 kB of
`valid.txt`.

The truth is torch's: the plain run prints the loss of each batch (the VAE's and the language model's at
`--log-interval 1`, the DCGAN's at each iteration); the batch of the first printed nan or inf is the step (the
DCGAN's three backward calls a batch counted as one), and the fixed twin prints none. The injected line is the line of the origin.
Then explain must name the op, the phase (forward), the injected line of the injected file and that step,
and the twin must get no non-finite finding. Prints one JSON line per case and a summary; exit status 1 when
a check fails.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TORCHVISION_STUB = {
    "__init__.py": "from . import datasets, transforms, utils  # a stub for benchmarks/examples_nan.py\n",
    "datasets.py": '''import torch


class _Images(torch.utils.data.Dataset):
    def __init__(self, n, shape, seed, transform=None, binary=False):
        g = torch.Generator().manual_seed(seed)
        x = torch.rand(n, *shape, generator=g)
        self.x = (x > 0.7).float() if binary else x
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.transform = transform

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        img = self.x[i]
        return (self.transform(img) if self.transform is not None else img), int(self.y[i])


class MNIST(_Images):
    def __init__(self, root, train=True, download=False, transform=None, **kw):
        super().__init__(256 if train else 128, (1, 28, 28), 0 if train else 1, transform, binary=True)
        self.x[100] = 0.0  # a blank image, as scanned data sets hold


class FakeData(_Images):
    def __init__(self, size=1000, image_size=(3, 224, 224), num_classes=10, transform=None, **kw):
        super().__init__(min(size, 64), image_size, 2, transform)
''',
    "transforms.py": '''class ToTensor:
    def __call__(self, x):
        return x


class Compose:
    def __init__(self, ts):
        self.ts = ts

    def __call__(self, x):
        for t in self.ts:
            x = t(x)
        return x


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, x):
        import torch
        return (x - torch.tensor(self.mean).view(-1, 1, 1)) / torch.tensor(self.std).view(-1, 1, 1)


def _identity(*a, **k):
    return lambda x: x


Resize = CenterCrop = Grayscale = _identity
''',
    "utils.py": "def save_image(*args, **kwargs):\n    pass\n",
}

STANDARDIZE = '''def standardize(x):  # injected: each image to zero mean and unit std, with no eps
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    return (x - mean) / x.std(dim=(1, 2, 3), keepdim=True)


'''

CASES = {
    "vae_sqrt_logvar": {
        "folder": "vae", "file": "main.py", "run": "main.py", "stub": True,
        "bug": ("std = torch.exp(0.5*logvar)", "std = torch.sqrt(logvar)  # injected: a log-variance taken for a variance"),
        "args": ["--epochs", "1", "--batch-size", "64", "--log-interval", "1", "--no-accel"],
        "loss": r"^Train Epoch: (\d+) \[(\d+)/\d+ .*Loss: (\S+)$", "per_batch_count": 64, "op": "aten.sqrt",
    },
    "word_lm_log_of_softmax": {
        "folder": "word_language_model", "file": "model.py", "run": "main.py", "stub": False,
        "bug": ("return F.log_softmax(decoded, dim=1), hidden",
                "return torch.log(F.softmax(decoded, dim=1)), hidden  # injected: the log of a softmax"),
        "args": ["--epochs", "1", "--emsize", "32", "--nhid", "32", "--bptt", "10", "--batch_size", "8", "--lr", "400",
                 "--log-interval", "1", "--dropout", "0"],
        "loss": r"^\| epoch +(\d+) \| +(\d+)/ *\d+ batches .*\| loss +(\S+) \|", "op": "aten.log",
    },
    "mnist_standardize_unnamed": {
        "folder": "mnist", "file": "main.py", "run": "main.py", "stub": True,
        "bug": [("class Net(nn.Module):", STANDARDIZE + "class Net(nn.Module):"),
                ("        x = self.conv1(x)\n", "        x = self.conv1(standardize(x))  # injected\n")],
        "origin": "return (x - mean) / x.std(",
        "args": ["--epochs", "1", "--batch-size", "64", "--test-batch-size", "64", "--log-interval", "1", "--no-accel"],
        "loss": r"^Train Epoch: (\d+) \[(\d+)/\d+ .*Loss: (\S+)$", "per_batch_count": 64, "op": "aten.div",
    },
    "dcgan_bce_by_hand": {
        "folder": "dcgan", "file": "main.py", "run": "main.py", "stub": True,
        "bug": ("criterion = nn.BCELoss()",
                "criterion = lambda p, y: -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()  # injected: BCE by hand"),
        "args": ["--dataset", "fake", "--workers", "0", "--batchSize", "8", "--ngf", "8", "--ndf", "8", "--niter", "1",
                 "--lr", "0.05", "--manualSeed", "1", "--outf", "out"],
        "loss": r"^\[(\d+)/\d+\]\[(\d+)/\d+\] Loss_D: (\S+) Loss_G: (\S+)", "backwards": 3, "op": "aten.log",
    },
}


def prepare(src: Path, case: dict, dst: Path, inject: bool) -> int | None:
    """Copy the example, stub its data, inject the bug; the injected line's number (None: not injected)."""
    shutil.copytree(src / case["folder"], dst, ignore=shutil.ignore_patterns(".git", "results"))
    (dst / "results").mkdir(exist_ok=True)
    (dst / "out").mkdir(exist_ok=True)
    if case["stub"]:
        (dst / "torchvision").mkdir()
        for name, text in TORCHVISION_STUB.items():
            (dst / "torchvision" / name).write_text(text)
    data = dst / "data" / "wikitext-2"
    if data.is_dir():  # the language model: a small corpus, from the example's own text
        valid = (data / "valid.txt").read_text(encoding="utf8")
        (data / "train.txt").write_text(valid[:40_000], encoding="utf8")
        (data / "valid.txt").write_text(valid[40_000:50_000], encoding="utf8")
        (data / "test.txt").write_text(valid[50_000:60_000], encoding="utf8")
    if not inject:
        return None
    path = dst / case["file"]
    text = path.read_text()
    bugs = case["bug"] if isinstance(case["bug"], list) else [case["bug"]]
    for old, new in bugs:
        if text.count(old) != 1:
            raise SystemExit(f"{case['folder']}/{case['file']} has no single `{old}` to inject into (a newer example?)")
        text = text.replace(old, new)
    path.write_text(text)
    origin = case.get("origin", bugs[0][1])
    return text[:text.index(origin)].count("\n") + 1


def first_nonfinite_step(stdout: str, case: dict, raised: bool) -> int | None:
    """The batch of the first printed loss that is nan or inf (read from the line: the VAE prints the samples
    seen, the language model the batch index, the DCGAN the iteration); for a program that raised first (torch
    refusing a NaN: `binary_cross_entropy`'s "between 0 and 1"), the batch after the last it printed."""
    last = -1
    for m in re.finditer(case["loss"], stdout, re.M):
        last = int(m[2]) // case.get("per_batch_count", 1)
        if any(v.lower().strip(",") in ("nan", "inf", "-inf") for v in m.groups()[2:]):
            return last
    return last + 1 if raised else None


def run_case(src: Path, name: str, case: dict, env: dict) -> dict:
    found: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, inject in (("injected", True), ("fixed", False)):
            work = Path(tmp) / label
            line = prepare(src, case, work, inject)
            cmd = [case["run"], *case["args"]]
            ref = subprocess.run([sys.executable, *cmd], cwd=work, env=env, capture_output=True, text=True, timeout=900)
            ts = subprocess.run([sys.executable, "-m", "tensorscope", "explain", "--json", *cmd], cwd=work, env=env,
                                capture_output=True, text=True, timeout=1800)
            try:
                doc = json.loads(ts.stdout)
            except ValueError:
                found[label] = {"error": ts.stderr[-2000:]}
                continue
            hazards = [h for h in doc["hazards"] if "non-finite" in h["kind"]]
            diag = doc["diagnosis"] if doc["diagnosis"] and "non-finite" in doc["diagnosis"]["kind"] else None
            findings = hazards + ([diag] if diag else [])
            found[label] = {"python_exit": ref.returncode, "explain_exit_status": doc["program"]["exit_status"],
                            "same_output": ts.stderr.replace("\r", "").startswith(ref.stdout) if ref.stdout else None,
                            "truth_step": first_nonfinite_step(ref.stdout, case, ref.returncode != 0),
                            "raised": ref.stderr.strip().splitlines()[-1][:200] if ref.returncode else None,
                            "injected_line": line,
                            "findings": [{"kind": h["kind"], "culprit": h["culprit"],
                                          **{k: (h.get("nonfinite") or {}).get(k) for k in ("op", "phase", "step", "value")}}
                                         for h in findings]}
    inj, fixed = found.get("injected", {}), found.get("fixed", {})
    f = (inj.get("findings") or [{}])[0]
    culprit = f.get("culprit") or {}
    checks = {
        "python and explain exit alike": "error" not in inj and inj.get("python_exit") == inj.get("explain_exit_status"),
        "torch: the injected run goes non-finite, the twin does not": inj.get("truth_step") is not None
        and "error" not in fixed and fixed.get("truth_step") is None,
        "kind": f.get("kind") in ("silent-non-finite-value", "non-finite-value"),
        "op": f.get("op") == case["op"],
        "phase": f.get("phase") == "forward",
        "line": (Path(str(culprit.get("file"))).name, culprit.get("line")) == (case["file"], inj.get("injected_line")),
        # the backward calls of a batch (the DCGAN: 3); a run of one backward call reports no step (step 0)
        "step": (f.get("step") // case.get("backwards", 1) if f.get("step") is not None else 0) == inj.get("truth_step"),
        "the twin gets no finding": fixed.get("findings") == [],
    }
    return {"case": name, "found": found, "checks": checks}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("examples", type=Path)
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    ap.add_argument("--tree", type=Path, default=REPO, help="the tensorscope tree to run (default: this one)")
    a = ap.parse_args()
    if not (a.examples / "vae" / "main.py").exists():
        print(f"no pytorch/examples checkout at {a.examples}: nothing to do", file=sys.stderr)
        return 0
    env = dict(os.environ, PYTHONPATH=str(a.tree.resolve()), OMP_NUM_THREADS="1", TENSORSCOPE_NO_PROGRESS="1")
    results = [run_case(a.examples, name, CASES[name], env) for name in (a.case or CASES)]
    for r in results:
        print(json.dumps(r))
    score = {k: sum(r["checks"][k] for r in results) for k in results[0]["checks"]}
    print(json.dumps({"cases": len(results), "passed": score}))
    return 0 if all(all(r["checks"].values()) for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
