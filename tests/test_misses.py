"""Diagnoses taken from what ran, on shapes of each bug that the corpora do not hold.

Each case is a small program (one file, or a script with a package beside it) with markers
``# <- culprit``, ``# <- saved``, ``# <- backward``. Torch confirms each expectation: the plain
program raises the kind's error, and the same program with the culprit line rewritten as the
case says (the fix) runs to the end under plain python. The runs of all cases share one
fixture: forks of one process that imported torch once.
"""

from __future__ import annotations

import json
import re
import textwrap

import pytest

try:
    from _cli import run_many
except ImportError:  # tests/ became a package
    from tests._cli import run_many

HAZARD = "silent-saved-tensor-write"
# name -> {"files": {path: source}, "kind": code, "error": text torch raises, "fix": (path, old, new)}
CASES = {
    # backward-twice: a state kept on an object, updated in a method, carried into the next step
    "twice_memory_slots": {
        "files": {"main.py": """
            import torch


            class Memory:
                def __init__(self):
                    self.slots = torch.zeros(2, 3)

                def write(self, feats, gate):
                    self.slots = self.slots * gate + feats  # <- culprit
                    return self.slots


            torch.manual_seed(0)
            gate = torch.rand(3, requires_grad=True)
            w = torch.randn(3, 3, requires_grad=True)
            mem = Memory()
            step = 0
            while step < 3:
                feats = torch.randn(2, 3) @ w
                out = mem.write(feats, gate)
                out.square().mean().backward()  # <- backward
                step += 1
        """},
        "kind": "backward-twice",
        "error": "backward through the graph a second time",
        "fix": ("main.py", "self.slots * gate", "self.slots.detach() * gate"),
    },
    # backward-twice: the loop's detach (`hidden = repackage_hidden(hidden)`) sits in a branch that did not
    # run; the carry is the model call that stores `hidden`, not that earlier self-update of the name
    "twice_repackage_skipped": {
        "files": {"main.py": """
            import torch

            DETACH = False


            def repackage_hidden(h):
                return tuple(v.detach() for v in h)


            torch.manual_seed(0)
            rnn = torch.nn.LSTM(4, 8)
            hidden = (torch.zeros(1, 2, 8), torch.zeros(1, 2, 8))
            data = torch.randn(9, 2, 4)
            for i in range(0, 8, 3):
                if DETACH:
                    hidden = repackage_hidden(hidden)
                output, hidden = rnn(data[i:i + 3], hidden)  # <- culprit
                output.square().mean().backward()  # <- backward
        """},
        "kind": "backward-twice",
        "error": "backward through the graph a second time",
        "fix": ("main.py", "DETACH = False", "DETACH = True"),
    },
    # a shape-only in-place op (squeeze_) on a saved softmax output, inside a package beside the script
    "metadata_squeeze_in_package": {
        "files": {"heads/__init__.py": "", "heads/pool.py": """
            import torch


            def attention_weights(scores):
                w = torch.softmax(scores, dim=-1)  # <- saved
                w.squeeze_(1)  # <- culprit
                return w
        """, "main.py": """
            import torch
            from heads.pool import attention_weights

            torch.manual_seed(0)
            scores = torch.randn(4, 1, 5, requires_grad=True)
            w = attention_weights(scores)
            v = torch.randn(4, 5)
            (w * v).sum().backward()  # <- backward
        """},
        "kind": "inplace-modified-saved-tensor",
        "error": "modified by an inplace operation",
        "fix": ("heads/pool.py", "w.squeeze_(1)", "w = w.squeeze(1)"),
    },
    # an in-place module that torch reaches through torch._VF (nn.Threshold), after tanh, in a Sequential
    "vf_threshold_inplace_in_package": {
        "files": {"blocks/__init__.py": "", "blocks/mlp.py": """
            import torch.nn as nn


            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Threshold(0.1, 0.0, inplace=True),
                                             nn.Linear(6, 2))

                def forward(self, x):
                    return self.net(x) * 2  # <- culprit <- saved
        """, "main.py": """
            import torch
            from blocks.mlp import Block

            torch.manual_seed(0)
            block = Block()
            block(torch.randn(3, 4)).sum().backward()  # <- backward
        """},
        "kind": "inplace-modified-saved-tensor",
        "error": "modified by an inplace operation",
        "fix": ("blocks/mlp.py", "inplace=True", "inplace=False"),
    },
    # NumPy refills, inside a helper, a buffer whose tensor mm saved; the trace must not leak into the program
    "numpy_refill_in_helper": {
        "files": {"main.py": """
            import sys

            import numpy as np
            import torch


            def refill(view, step):
                view[...] = step  # <- culprit
                return view


            feats = torch.ones(2, 3)
            view = feats.numpy()
            w = torch.ones(3, 1, requires_grad=True)
            out = feats @ w  # <- saved
            refill(view, 7.0)
            out.sum().backward()  # <- backward
            print(w.grad.flatten().tolist(), sys.gettrace())
        """},
        "kind": HAZARD,
        "fix": ("main.py", "view = feats.numpy()", "view = feats.numpy().copy()"),
    },
    # BatchNorm2d running statistics updated by a training-mode call made under no_grad (a calibration
    # pass) while the eval-mode output that saved them waits for backward
    "batchnorm_calibration_under_no_grad": {
        "files": {"main.py": """
            import torch
            import torch.nn as nn

            torch.manual_seed(0)
            model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
            x = torch.randn(2, 1, 5, 5, requires_grad=True)
            model.eval()
            out = model(x)  # <- saved
            model.train()
            with torch.no_grad():
                model(torch.randn(2, 1, 5, 5) * 4 + 1)  # <- culprit
            out.square().sum().backward()  # <- backward
            print([round(v, 4) for v in x.grad.flatten()[:4].tolist()])
        """},
        "kind": HAZARD,
        "fix": ("main.py", "model(torch.randn(2, 1, 5, 5) * 4 + 1)", "pass"),
    },
    # a gradient-clipping hook on a residual branch clamps in place: AddBackward0 handed the same
    # gradient to the skip connection, which is clipped too
    "grad_hook_clamp_residual": {
        "files": {"main.py": """
            import torch

            torch.manual_seed(0)
            lin = torch.nn.Linear(4, 4)
            x = torch.randn(2, 4, requires_grad=True)
            h = x * 2
            branch = lin(h)
            branch.register_hook(lambda g: g.clamp_(-0.01, 0.01))  # <- culprit
            out = branch + h
            (out * 5).sum().backward()  # <- backward
            print([round(v, 4) for v in x.grad.flatten().tolist()])
        """},
        "kind": HAZARD,
        "fix": ("main.py", "g.clamp_(-0.01, 0.01)", "g.clamp(-0.01, 0.01)"),
        "needs_use_count": True,  # NOTE [A tensor's use count] in compat.py
    },
    # the same in-place hook where no other branch holds the gradient: it only rescales its own: fine
    "grad_hook_inplace_unshared_is_fine": {
        "files": {"main.py": """
            import torch

            x = torch.ones(3, requires_grad=True)
            y = x * 2
            y.register_hook(lambda g: g.mul_(3))
            (y * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
            x2 = torch.ones(3, requires_grad=True)
            y2 = x2 * 2
            y2.register_hook(lambda g: g * 3)
            (y2 * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
            assert torch.equal(x.grad, x2.grad)
            print(x.grad.tolist())
        """},
        "kind": None,
        "fix": ("main.py", "print(", "print("),
    },
    # a threshold comparison inside a helper of a package turns the scores into a bool mask: the loss
    # computed from it has no grad_fn (recorded at runtime, not read from the source)
    "compare_in_package_helper": {
        "files": {"metrics/__init__.py": "", "metrics/soft.py": """
            import torch


            def hit_rate(scores, threshold):
                hits = torch.ge(scores, threshold)  # <- culprit
                return hits.float().mean()
        """, "main.py": """
            import torch
            from metrics.soft import hit_rate

            torch.manual_seed(0)
            w = torch.randn(5, requires_grad=True)
            scores = torch.randn(8, 5) @ w
            loss = 1 - hit_rate(scores, 0.0)
            loss.backward()  # <- backward
        """},
        "kind": "no-grad-fn",
        "error": "does not require grad and does not have a grad_fn",
        "fix": ("metrics/soft.py", "torch.ge(scores, threshold)", "torch.sigmoid(scores - threshold)"),
        "provenance": "compare",
    },
}


def _marks(files: dict[str, str]) -> dict[str, tuple[str, int]]:
    marks = {}
    for path, src in files.items():
        for i, line in enumerate(src.splitlines(), 1):
            for m in re.finditer(r"<-\s*(culprit|saved|backward)\b", line):
                marks[m[1]] = (path, i)
    return marks


def _write(folder, files):
    for path, src in files.items():
        p = folder / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(src).lstrip("\n"))


def _prepare(folder, case):
    """Write the program to FOLDER and its fixed copy beside it; the fixed copy's folder."""
    _write(folder, case["files"])
    fixed_dir = folder.parent / (folder.name + "_fixed")
    _write(fixed_dir, case["files"])
    path, old, new = case["fix"]
    target = fixed_dir / path
    text = target.read_text()
    assert old in text, (path, old)
    target.write_text(text.replace(old, new))
    return fixed_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name -> (plain python's run, explain's run and its -o report, plain python on the fixed copy), all
    forks of one process that imported torch once (tests/_forked.py)."""
    root = tmp_path_factory.mktemp("misses")
    jobs = []
    for name, case in CASES.items():
        folder = root / name
        fixed_dir = _prepare(folder, case)
        jobs += [("python", folder / "main.py", {"cwd": folder}),
                 ("tensorscope", "explain", "-o", "r.json", "main.py", {"cwd": folder}),
                 ("python", fixed_dir / "main.py", {"cwd": fixed_dir})]
    results = iter(run_many(jobs))
    out = {}
    for name in CASES:
        plain, (code, stdout, err, _), fixed = next(results), next(results), next(results)
        report = root / name / "r.json"
        out[name] = (plain, (code, stdout, err, json.loads(report.read_text()) if report.exists() else None), fixed)
    return out


def _place(w):
    return (w["file"].replace("\\", "/").rsplit("/", 1)[-1] if w else None, w["line"] if w else None)


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_confirms_the_case(runs, name):
    plain, _, fixed = runs[name]
    if CASES[name]["kind"] is None:  # a fine program: it checks its own gradient against torch
        assert plain[0] == 0, plain[2][-1500:]
    elif CASES[name]["kind"] == HAZARD:  # no error: the write changes the gradient the program prints
        assert plain[0] == 0 and fixed[0] == 0, (plain[2][-1500:], fixed[2][-1500:])
        assert plain[1] != fixed[1], plain[1]
    else:
        assert plain[0] != 0 and CASES[name]["error"] in plain[2], plain[2][-1500:]
        assert fixed[0] == 0, fixed[2][-1500:]


@pytest.mark.parametrize("name", sorted(CASES))
def test_program_output_untouched(runs, name):
    plain, (code, out, _, _), _ = runs[name]
    assert out == plain[1]
    if CASES[name]["kind"] != HAZARD and CASES[name]["kind"] is not None:  # explain: 1 on a hazard, 0 when clean
        assert code == plain[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_diagnosis_from_what_ran(runs, name):
    case = CASES[name]
    _, (code, _, err, doc), _ = runs[name]
    assert doc is not None, err[-2000:]
    d = doc["diagnosis"]
    if case["kind"] is None:
        assert code == 0 and d is None and doc["hazards"] == [], (d, doc["hazards"])
        return
    import torch

    if case.get("needs_use_count") and not hasattr(torch.Tensor, "_use_count"):  # torch 2.2, 2.3: not checked
        assert d is None and doc["hazards"] == [] and any("_use_count" in n for n in doc["notes"]), doc["notes"]
        return
    if case["kind"] == HAZARD:
        assert d is None and doc["hazards"], (d, doc["hazards"])  # BatchNorm: running_mean and running_var
        d = doc["hazards"][0]
    assert d is not None and d["kind"] == case["kind"], (d, err[-1500:])
    marks = _marks({p: textwrap.dedent(s).lstrip("\n") for p, s in case["files"].items()})
    for key, field in (("culprit", "culprit"), ("saved", "saved_by"), ("backward", "backward")):
        if key in marks:
            path, line = marks[key]
            assert d[field] and d[field]["line"] == line and d[field]["file"].endswith(path), (key, d[field])


def test_recorded_cut_decides(runs):
    for name, case in CASES.items():
        if "provenance" in case:
            prov = runs[name][1][3]["diagnosis"]["provenance"]
            assert prov and prov["cut"] == case["provenance"], (name, prov)


def test_freeing_backward_stays_a_related_line(runs):
    d = runs["twice_memory_slots"][1][3]["diagnosis"]
    lines = [c["line"] for c in d["alias_chain"]]
    assert _marks({"main.py": textwrap.dedent(CASES["twice_memory_slots"]["files"]["main.py"]).lstrip("\n")})[
        "backward"][1] in lines


def test_a_carry_in_a_branch_that_did_not_run_is_not_named(runs):
    """The sentence on the carried state quotes the self-update that stored it (the culprit line), not
    `hidden = repackage_hidden(hidden)`, which detaches and did not run."""
    d = runs["twice_repackage_skipped"][1][3]["diagnosis"]
    line = _marks({"main.py": textwrap.dedent(CASES["twice_repackage_skipped"]["files"]["main.py"]).lstrip("\n")})[
        "culprit"][1]
    assert f"carried from one iteration to the next (line {line}: " in d["explanation"], d["explanation"]
    assert "repackage_hidden" not in d["explanation"], d["explanation"]
