"""End-to-end checks of every failure kind's diagnosis: the real CLI on small programs.

Each case is a short program (written to a temporary folder) with marker comments
``# <- culprit``, ``# <- saved`` and ``# <- backward``; the test asserts the kind, those
lines, and that the fix names the concrete construct to change. All programs run up front
(``reports`` fixture) as forks of one process that imported torch once, so the file stays fast.
"""

from __future__ import annotations

import re
import textwrap

import pytest
import torch

try:
    from _cli import run_many
except ImportError:  # tests/ became a package
    from tests._cli import run_many

CASES = {
    "twice_same_loss": ("backward-twice", """
        import torch
        x = torch.randn(3, requires_grad=True)
        y = x.exp()  # <- saved
        out = y.sum()
        out.backward()  # <- culprit
        out.backward()  # <- backward
    """, ["retain_graph=True", "out.backward(retain_graph=True)"]),
    "twice_carried_state": ("backward-twice", """
        import torch
        w = torch.randn(4, 4, requires_grad=True)
        state = torch.zeros(1, 4)
        step = 0
        while step < 3:
            state = torch.tanh(state @ w + 1.0)  # <- saved <- culprit
            loss = state.pow(2).sum()
            loss.backward()  # <- backward
            step += 1
    """, ["state = state.detach()"]),
    "twice_shared_features": ("backward-twice", """
        import torch
        w = torch.randn(3, 3, requires_grad=True)
        x = torch.randn(2, 3)
        z = torch.sigmoid(x @ w)  # <- saved
        first = z.sum()
        second = (z * 2).mean()
        first.backward()  # <- culprit
        second.backward()  # <- backward
    """, ["backward() once", "retain_graph=True"]),
    "nograd_detach_in_helper": ("no-grad-fn", """
        import torch
        import torch.nn as nn

        def predict(model, x):
            return model(x).detach()  # <- culprit

        model = nn.Linear(3, 1)
        loss = predict(model, torch.randn(4, 3)).pow(2).mean()
        loss.backward()  # <- backward
    """, [".detach()", "model(x)"]),
    "nograd_decorated_helper": ("no-grad-fn", """
        import torch
        import torch.nn as nn

        @torch.no_grad()  # <- culprit
        def encode(model, x):
            return model(x)

        model = nn.Linear(3, 2)
        loss = encode(model, torch.randn(4, 3)).sum()
        loss.backward()  # <- backward
    """, ["no_grad"]),
    "nograd_set_grad_enabled": ("no-grad-fn", """
        import torch
        w = torch.randn(3, requires_grad=True)
        torch.set_grad_enabled(False)  # <- culprit
        loss = (w * 2).sum()
        loss.backward()  # <- backward
    """, ["torch.set_grad_enabled"]),
    "nograd_nothing_requires_grad": ("no-grad-fn", """
        import torch
        w = torch.randn(3)
        x = torch.randn(5, 3)
        loss = (x @ w).pow(2).mean()
        loss.backward()  # <- culprit <- backward
    """, ["requires_grad=True"]),
    "nograd_tensor_of_losses": ("no-grad-fn", """
        import torch
        w = torch.randn(2, requires_grad=True)
        a = (w * 2).sum()
        b = (w * 3).sum()
        total = torch.tensor([a, b]).sum()  # <- culprit
        total.backward()  # <- backward
    """, ["torch.stack([a, b])"]),
    "leaf_inplace_computation": ("leaf-inplace", """
        import torch
        x = torch.ones(3, requires_grad=True)
        x.mul_(2)  # <- culprit
    """, ["x = x.mul(2)", "torch.no_grad()"]),
    "leaf_inplace_update": ("leaf-inplace", """
        import torch
        p = torch.randn(3, requires_grad=True)
        (p ** 2).sum().backward()
        p.sub_(0.1 * p.grad)  # <- culprit
    """, ["with torch.no_grad(): p.sub_(0.1 * p.grad)"]),
    "view_split": ("view-inplace", """
        import torch
        x = torch.randn(4, requires_grad=True)
        y = x * 1.5
        a, b = y.split(2)
        a.add_(1)  # <- culprit
    """, ["a = a.add(1)", "a.clone()"]),
    "overlap_expand": ("overlapping-write", """
        import torch
        z = torch.zeros(1, 3).expand(4, 3)
        z.add_(1)  # <- culprit
    """, [".clone()", "repeat(4, 1)"]),
    "nonscalar_in_function": ("non-scalar-backward", """
        import torch

        def train(x):
            y = x * 2
            y.backward()  # <- culprit <- backward

        train(torch.randn(3, requires_grad=True))
    """, ["y.sum().backward()", "torch.ones_like(y)"]),
    "nonfloat_arange": ("non-float-requires-grad", """
        import torch
        idx = torch.arange(3, requires_grad=True)  # <- culprit
    """, ["dtype=torch.float32"]),
    "nonfloat_setter": ("non-float-requires-grad", """
        import torch
        scale = torch.tensor([1, 2])
        scale.requires_grad = True  # <- culprit
    """, ["scale.float()"]),
    "numpy_requires_grad": ("numpy-requires-grad", """
        import torch
        w = torch.randn(2, requires_grad=True)
        arr = (w * 3).numpy()  # <- culprit
    """, ["(w * 3).detach().numpy()"]),
    "resize": ("resize-requires-grad", """
        import torch
        table = torch.randn(2, 2, requires_grad=True)
        table.resize_(3, 2)  # <- culprit
    """, ["new_zeros(3, 2)"]),
    "other_matmul_shapes": ("other", """
        import torch
        a = torch.randn(2, 3)
        b = torch.randn(4, 5)
        c = torch.mm(a, b)  # <- culprit
    """, ["3 features", "expects 4"]),
    # NOTE [An exception re-raised from a DataLoader worker]: the worker's line, as python's output shows it last
    "other_dataloader_worker": ("other", """
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Data(Dataset):
            def __len__(self):
                return 8

            def __getitem__(self, i):
                if i == 5:
                    raise ValueError(f"bad sample {i}")  # <- culprit
                return torch.full((2,), float(i))

        if __name__ == "__main__":
            for batch in DataLoader(Data(), batch_size=2, num_workers=1):
                print(batch.sum().item())
    """, ["num_workers=0", "ValueError at line 10"]),
    "inplace_functional_relu_alias": ("inplace-modified-saved-tensor", """
        import torch
        import torch.nn.functional as F
        w = torch.randn(3, requires_grad=True)
        h = torch.sigmoid(w)  # <- saved
        F.relu_(h)  # <- culprit
        h.sum().backward()  # <- backward
    """, []),
}
if not torch.cuda.is_available():
    CASES["device_cuda_on_cpu_build"] = ("device-mismatch", """
        import torch
        dev = "cuda"
        x = torch.zeros(2, device=dev)  # <- culprit
    """, ["--device cpu", "torch.cuda.is_available()"])


def _marks(src: str) -> dict[str, int]:
    marks = {}
    for i, line in enumerate(src.splitlines(), 1):
        for m in re.finditer(r"<-\s*(culprit|saved|backward)\b", line):
            marks[m[1]] = i
    return marks


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("diag")
    paths = {}
    for name, (_, src, _) in CASES.items():
        p = folder / f"{name}.py"
        p.write_text(textwrap.dedent(src).lstrip("\n"))
        paths[name] = p
    # one process tree, one torch import (tests/_forked.py); each program still runs on its own
    results = run_many([("tensorscope", "explain", "--json", p, {"cwd": folder}) for p in paths.values()])
    return {name: (p.read_text(), r) for (name, p), r in zip(paths.items(), results)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_diagnosis(reports, name):
    kind, _, fix_words = CASES[name]
    src, (code, out, err, doc) = reports[name]
    assert doc is not None, err[-2000:]
    assert code == 1, err[-2000:]
    d = doc["diagnosis"]
    assert d is not None and d["kind"] == kind, (d, err[-1000:])
    marks = _marks(src)
    assert d["culprit"] and d["culprit"]["line"] == marks["culprit"], d
    assert d["culprit"]["file"].endswith(f"{name}.py")
    if "saved" in marks:
        assert d["saved_by"] and d["saved_by"]["line"] == marks["saved"], d
    if "backward" in marks:
        assert d["backward"] and d["backward"]["line"] == marks["backward"], d
    for word in fix_words:
        assert word in d["fix"], (word, d["fix"])
    assert d["explanation"] and "None" not in d["explanation"].replace("NoneType", "")


def test_carried_state_named(reports):
    d = reports["twice_carried_state"][1][3]["diagnosis"]
    assert d["culprit"]["alias"] == "state"
    assert d["saved_by"]["node"] == "TanhBackward0"


def test_shared_tensor_named(reports):
    d = reports["twice_shared_features"][1][3]["diagnosis"]
    assert d["culprit"]["alias"] == "z"
    assert "`z`" in d["explanation"]


def test_functional_inplace_writes_through_argument(reports):
    d = reports["inplace_functional_relu_alias"][1][3]["diagnosis"]
    assert d["culprit"]["alias"] == "h"


def test_tensor_of_scalar_tensors_runs_like_python(reports):
    # torch.tensor([a, b]) of 0-d tensors must not turn into "len() of a 0-d tensor" under tensorscope
    doc = reports["nograd_tensor_of_losses"][1][3]
    assert doc["program"]["exception"]["message"].startswith("element 0 of tensors does not require grad")


def test_dataloader_worker_line_is_the_one_python_shows(reports):
    """The line the diagnosis names for an exception raised in a DataLoader worker is the last frame of the
    worker's traceback that python prints (torch's text), and the `for` line is named as where it was re-raised."""
    from _cli import run_python

    src, (code, out, err, doc) = reports["other_dataloader_worker"]
    marks = _marks(src)
    folder = doc["program"]["path"].rsplit("/", 1)[0]
    py = run_python(doc["program"]["path"], cwd=folder, fresh=False)
    assert py[0] == code == 1 and py[1] and py[1] in err  # --json: the program's stdout is on stderr
    assert f'other_dataloader_worker.py", line {marks["culprit"]}, in __getitem__' in py[2], py[2]
    for_line = next(i for i, text in enumerate(src.splitlines(), 1) if text.lstrip().startswith("for batch"))
    assert f"re-raised it at line {for_line}" in doc["diagnosis"]["explanation"], doc["diagnosis"]
