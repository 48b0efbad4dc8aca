"""What a user sees on a real model: the finding on the last screen, a repeated hazard shown once.

One program, a small GPT (token and position embeddings, causal attention, MLP blocks, tied head,
AdamW), trains STEPS steps with a hand-written attention "temperature" written through `.data` into
softmax's saved output (a silent hazard in every block at every step), then fails on an in-place write
into a softmax output before backward. One `explain --json` run gives the document; the CLI renders
it again from the saved report (`explain REPORT.json`) in a 100-column terminal; the other forms are
rendered in-process from the same document. NOTE [The finding on the last screen], NOTE [Folding
repeated hazards].
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from _cli import run_cli
from test_sarif import sarif_schema, validate  # noqa: F401 (a fixture)
from tensorscope.pytest_plugin import hazard_lines
from tensorscope.render import render

LAYERS, STEPS = 2, 3
SCREEN = 50  # rows of the terminal the issue was measured in

PROGRAM = textwrap.dedent(f"""\
    import math
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)


    class Attention(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads, self.qkv, self.proj = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in self.qkv(x).split(d, 2))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
            att = att.masked_fill(~torch.tril(torch.ones(t, t)).bool(), float("-inf"))
            att = F.softmax(att, dim=-1)
            att.data.mul_(0.9)  # a "temperature" that autograd never sees
            return self.proj((att @ v).transpose(1, 2).contiguous().view(b, t, d))


    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(d), Attention(d, heads), nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))


    class GPT(nn.Module):
        def __init__(self, vocab=64, d=32, heads=4, layers={LAYERS}, ctx=16):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
            self.head.weight = self.wte.weight
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=0.02)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln_f(x))


    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, 64, (4, 17))
    for step in range({STEPS}):
        loss = F.cross_entropy(model(data[:, :-1]).reshape(-1, 64), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    probs = F.softmax(model(data[:, :-1]), dim=-1)
    probs.mul_(0.9)  # label smoothing by hand, in place on softmax's saved output
    (-(probs + 0.1 / 64).log().mean()).backward()
""")


@pytest.fixture(scope="module")
def explained(tmp_path_factory):
    root = tmp_path_factory.mktemp("screen")
    (root / "gpt.py").write_text(PROGRAM)
    rc, out, err, doc = run_cli("explain", "--json", "gpt.py", cwd=root)
    assert doc is not None, err[-2000:]
    (root / "report.json").write_text(out)
    return root, doc


def _lines(text: str) -> list[str]:
    return text.rstrip("\n").splitlines()


def test_the_finding_is_on_the_last_screen(explained):
    root, doc = explained
    d = doc["diagnosis"]
    assert d["kind"] == "inplace-modified-saved-tensor" and d["culprit"]["code"].startswith("probs.mul_(0.9)")
    verdict = f"failed: inplace-modified-saved-tensor at gpt.py:{d['culprit']['line']}; {LAYERS * STEPS} hazards"
    # explain's default in a 100-column terminal: the verdict, the panels and where the rest is
    env = dict(os.environ, COLUMNS="100", LINES=str(SCREEN))
    proc = subprocess.run([sys.executable, "-m", "tensorscope", "explain", "report.json"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    shown = _lines(proc.stdout)
    assert proc.returncode == 1 and shown[1] == verdict, proc.stdout + proc.stderr
    # with the program's own traceback above it (on stderr), it fits one screen
    rows = sum(max(1, -(-len(ln) // 100)) for ln in _lines(proc.stderr) + shown)
    assert rows <= SCREEN, proc.stderr + proc.stdout
    assert "Diagnosis: inplace-modified-saved-tensor" in proc.stdout and "fix: " in proc.stdout
    assert shown[-1].startswith("more: --report") and "Timeline" not in proc.stdout
    # the longer forms end with the verdict, so that the last screen of a long report holds it too
    for options in ({"report": True}, {"full": True}):
        text = render(doc, "text", width=100, **options)
        assert len(_lines(text)) > SCREEN and "Timeline" in text, options
        assert _lines(text)[-1] == verdict and _lines(text)[1] == verdict, options
    assert _lines(render(dict(doc, command="run"), "text", width=100))[-1] == verdict


def test_a_hazard_found_at_every_step_is_shown_once_with_its_count(explained, sarif_schema):
    root, doc = explained
    hazards = doc["hazards"]
    n = LAYERS * STEPS  # one softmax output written through .data per block per step
    assert [h["kind"] for h in hazards] == ["silent-saved-tensor-write"] * n  # the JSON keeps every one
    assert len({(h["culprit"]["line"], h["saved_by"]["line"]) for h in hazards}) == 1
    assert len({h["tensor"]["id"] for h in hazards}) == n
    text = render(doc, "text", width=100)
    assert text.count("Hazard (nothing raised): silent-saved-tensor-write") == 1
    assert f"Hazard (nothing raised): silent-saved-tensor-write (x{n})" in text
    assert f"found {n} times: tensors " in text
    assert f"{n} hazards (1 distinct)" not in text  # a failure's verdict counts the hazards only
    sarif = json.loads(render(doc, "sarif"))
    [result] = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "silent-saved-tensor-write"]
    assert result["occurrenceCount"] == n and f"found {n} times" in result["message"]["text"]
    validate(sarif, sarif_schema)
    html = render(doc, "html")
    assert html.count('class="diagnosis hazard"') == 1 and f'data-count="{n}"' in html
    lines = hazard_lines(hazards)
    assert lines.count("silent-saved-tensor-write at ") == 1 and f"found {n} times" in lines
    # without the failure, the verdict says how many distinct hazards the count holds
    alone = render(dict(doc, diagnosis=None), "text", width=100)
    assert f"{n} hazards (1 distinct): silent-saved-tensor-write" in alone


def test_a_clean_run_ends_with_its_verdict(tmp_path):
    """A clean training run's summary (parameters, timeline) outgrows a 50-row terminal: its last line is the
    verdict again, as the second is, so the last screen says nothing was found (NOTE [The finding on the last
    screen])."""
    clean = PROGRAM.split("probs = F.softmax")[0].replace("att.data.mul_(0.9)", "pass")
    assert "mul_" not in clean and "backward()" in clean
    (tmp_path / "gpt.py").write_text(clean)
    env = dict(os.environ, COLUMNS="80", LINES=str(SCREEN))
    py = subprocess.run([sys.executable, "gpt.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    proc = subprocess.run([sys.executable, "-m", "tensorscope", "run", "gpt.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert py.returncode == proc.returncode == 0 and py.stdout == "", proc.stderr
    shown = _lines(proc.stdout)
    verdict = f"clean: {STEPS} backward calls, all succeeded; hazards: none"
    assert len(shown) > SCREEN and "Timeline" in proc.stdout
    assert shown[1] == verdict and shown[-1] == verdict and shown[-2] == "", shown[-3:]
