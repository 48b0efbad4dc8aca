"""no-grad-fn culprits from what ran (runtime provenance), on two-file programs through the real CLI.

Each program is a script and a module beside it; the graph is cut inside a function of the
module and reaches the script's backward through a container. The expected lines are the
programs' own ``# <- culprit`` / ``# <- backward`` markers; plain python confirms the error.
"""

from __future__ import annotations

import re
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

try:
    from _cli import run_cli, run_python, validate_against_schema
except ImportError:  # tests/ became a package
    from tests._cli import run_cli, run_python, validate_against_schema

MESSAGE = "element 0 of tensors does not require grad and does not have a grad_fn"

PROGRAMS = {
    # a loss computed under torch.no_grad() inside a function, returned through a list; an earlier
    # no_grad block (the teacher's targets) is meant and is not the cut
    "list_return": {
        "lossfns.py": """
            import torch
            import torch.nn.functional as F


            def batch_losses(model, x, y):
                parts = []
                with torch.no_grad():  # <- culprit
                    logits = model(x)
                    parts.append(F.cross_entropy(logits, y))
                    parts.append((logits.argmax(1) == y).float().mean())
                return parts
        """,
        "main.py": """
            import torch
            import torch.nn as nn

            from lossfns import batch_losses

            torch.manual_seed(0)
            teacher = nn.Linear(5, 3)
            model = nn.Linear(5, 3)
            x = torch.randn(8, 5)
            with torch.no_grad():
                y = teacher(x).argmax(1)
            losses = batch_losses(model, x, y)
            loss = losses[0]
            loss.backward()  # <- backward
        """,
        "cut": "grad_mode", "fix": ["no_grad"],
    },
    # Normal(...).sample() where rsample() was needed, in a module's forward; a logged .item() of
    # a detached value on the way is not a cut of the graph
    "sample": {
        "policy.py": """
            import torch
            import torch.nn as nn
            from torch.distributions import Normal


            class Allocator(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mu = nn.Linear(5, 4)
                    self.log_sigma = nn.Parameter(torch.zeros(4))

                def forward(self, x):
                    dist = Normal(self.mu(x), self.log_sigma.exp())
                    spread = dist.stddev.detach().mean().item()
                    raw = dist.sample()  # <- culprit
                    return [torch.softmax(raw, dim=1), spread]
        """,
        "main.py": """
            import torch

            from policy import Allocator

            torch.manual_seed(0)
            alloc = Allocator()
            weights, spread = alloc(torch.randn(16, 5))
            returns = torch.randn(16, 4) * 0.02
            loss = -(weights * returns).sum(dim=1).mean()
            loss.backward()  # <- backward
        """,
        "cut": "sample", "fix": [".rsample()"],
    },
    # autograd.grad without create_graph=True feeding a gradient penalty returned in a dict; a
    # .detach() before the critic's successful backward lies outside the failing step
    "penalty": {
        "penalty.py": """
            import torch


            def gradient_penalty(critic, real, fake):
                alpha = torch.rand(real.size(0), 1)
                mix = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
                score = critic(mix)
                grads = torch.autograd.grad(score.sum(), mix)[0]  # <- culprit
                return {"gp": ((grads.norm(2, dim=1) - 1) ** 2).mean()}
        """,
        "main.py": """
            import torch
            import torch.nn as nn

            from penalty import gradient_penalty

            torch.manual_seed(0)
            critic = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
            real = torch.randn(6, 2)
            fake = torch.randn(6, 2)
            reference = critic(real).detach()
            d_loss = critic(fake).mean() - critic(real).mean()
            d_loss.backward()
            terms = gradient_penalty(critic, real, fake)
            terms["gp"].backward()  # <- backward
        """,
        "cut": "grad", "fix": ["create_graph=True"],
    },
}


def _marks(files: dict) -> dict:
    out = {}
    for name, text in files.items():
        for i, line in enumerate(text.splitlines(), 1):
            for m in re.findall(r"<- (\w+)", line):
                out[m] = (name, i)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("provenance")
    progs = {}
    for prog, spec in PROGRAMS.items():
        folder = root / prog
        folder.mkdir()
        files = {k: textwrap.dedent(v).lstrip("\n") for k, v in spec.items() if k.endswith(".py")}
        for name, text in files.items():
            (folder / name).write_text(text)
        progs[prog] = (folder, files)

    def one(prog):
        folder, files = progs[prog]
        return files, run_cli("explain", "--json", str(folder / "main.py"), cwd=folder)

    with ThreadPoolExecutor(max_workers=2) as pool:
        out = dict(zip(progs, pool.map(one, progs)))
    folder = progs["sample"][0]
    out["_python_sample"] = run_python(folder / "main.py", cwd=folder, fresh=False)
    return out


@pytest.mark.parametrize("prog", sorted(PROGRAMS))
def test_culprit_is_where_the_graph_was_cut(runs, prog):
    files, (code, out, err, doc) = runs[prog]
    assert doc is not None, err[-2000:]
    assert code == 1, err[-2000:]
    assert doc["program"]["exception"]["message"].startswith(MESSAGE)
    assert validate_against_schema(doc)
    d = doc["diagnosis"]
    assert d["kind"] == "no-grad-fn", d
    marks = _marks(files)
    for key, field in (("culprit", "culprit"), ("backward", "backward")):
        name, line = marks[key]
        assert d[field]["line"] == line and d[field]["file"].endswith(name), (key, d[field])
    assert d["provenance"]["cut"] == PROGRAMS[prog]["cut"], d["provenance"]
    for word in PROGRAMS[prog]["fix"]:
        assert word in d["fix"], d["fix"]


def test_region_is_named_with_its_function(runs):
    d = runs["list_return"][1][3]["diagnosis"]
    region = d["provenance"]["region"]
    assert region["mode"] == "no_grad" and region["file"].endswith("lossfns.py")
    assert region["line"] == _marks(runs["list_return"][0])["culprit"][1]


def test_sample_wrapper_leaves_the_program_as_under_python(runs):
    code, out, err = runs["_python_sample"]
    _, (t_code, t_out, t_err, _) = runs["sample"]
    assert code == 1 and MESSAGE in err
    # explain --json prints the report on stdout; the program's stderr ends with the same error line
    assert err.strip().splitlines()[-1] in t_err
