"""A real repository with a leak injected, run as a user would (leak14; benchmarks/RESULTS.md "leak14").

karpathy/nanoGPT's model.py (from a local mirror: ``--repo``, a bare git dir or a checkout) is copied,
unchanged but for one line a user adds to ``GPT.generate`` to keep each step's probabilities for later
analysis (``self.probs_trace.append(probs)``; the ablation keeps ``probs.max().item()`` instead). A driver
of our own builds a small GPT (2 layers, width 64, GPT-2's vocabulary) and samples 24 tokens: generate()
runs under ``@torch.no_grad()``, so there is no backward call. Truth from torch alone: the live tensor
bytes at the end of the run (torch.profiler, profile_memory=True) at 12 and 24 new tokens, leak and ablation. Then
``tensorscope run --json`` on both. Usage::

    python benchmarks/nanogpt_generate_leak.py --repo /work/.mirror/karpathy+nanoGPT/repo
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ANCHOR = "            probs = F.softmax(logits, dim=-1)\n"
LEAK = ANCHOR + "            self.probs_trace.append(probs)\n"
FIX = ANCHOR + "            self.probs_trace.append(probs.max().item())\n"

DRIVER = '''
import os, torch
from model import GPT, GPTConfig
torch.manual_seed(0)
model = GPT(GPTConfig(block_size=64, n_layer=2, n_head=2, n_embd=64, dropout=0.0)).eval()
model.probs_trace = []
idx = torch.zeros((1, 1), dtype=torch.long)
out = model.generate(idx, int(os.environ.get("NEW_TOKENS", "24")), temperature=1.0, top_k=None)
print("generated", out.shape[1] - 1, "tokens; trace", len(model.probs_trace))
'''

PROBE = '''
import os, runpy, sys, json
import torch
from torch.profiler import profile, ProfilerActivity
sys.path.insert(0, os.getcwd())
out = {}
for n in (12, 24):
    os.environ["NEW_TOKENS"] = str(n)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        g = runpy.run_path("drive.py", run_name="__main__")  # kept: what the program holds at its end
    live = peak = 0
    for e in sorted(prof.events(), key=lambda e: e.time_range.start):
        live += e.self_cpu_memory_usage
        peak = max(peak, live)
    out[n] = live  # live at the end of the run (the model itself is made inside the profile too)
    del g
print("@@" + json.dumps(out))
'''


def model_source(repo: str) -> str:
    for args in (["git", "--git-dir", repo, "show", "HEAD:model.py"],
                 ["git", "--git-dir", os.path.join(repo, ".git"), "show", "HEAD:model.py"]):
        r = subprocess.run(args, capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout
    return open(os.path.join(repo, "model.py")).read()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--tree", default=None, help="the tensorscope checkout to run (default: this one)")
    a = ap.parse_args()
    src = model_source(a.repo)
    assert ANCHOR in src, "generate() changed upstream"
    here = a.tree or os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    for name, line in (("leak", LEAK), ("ablation", FIX)):
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "model.py"), "w").write(src.replace(ANCHOR, line))
            open(os.path.join(d, "drive.py"), "w").write(DRIVER)
            truth = subprocess.run([sys.executable, "-c", PROBE], cwd=d, capture_output=True, text=True)
            peaks = next((json.loads(x[2:]) for x in truth.stdout.splitlines() if x.startswith("@@")), {})
            per = (peaks.get("24", 0) - peaks.get("12", 0)) // 12 if peaks else None
            env = dict(os.environ, PYTHONPATH=here)
            r = subprocess.run([sys.executable, "-m", "tensorscope", "run", "--json", "drive.py"], cwd=d, env=env,
                               capture_output=True, text=True)
            doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
            found = [(h["kind"], (h.get("culprit") or {}).get("file"), (h.get("culprit") or {}).get("line"),
                      (h.get("culprit") or {}).get("code"), (h.get("retention") or {}).get("bytes_per_step"))
                     for h in doc.get("hazards") or []]
            inj = src.replace(ANCHOR, line).splitlines().index(line.splitlines()[-1]) + 1
            print(f"{name}: torch {per:+,} B per new token (profiler, live at the end, 12 vs 24 tokens); injected line "
                  f"model.py:{inj}; tensorscope exit {r.returncode}: {found or 'no hazard'}", flush=True)


if __name__ == "__main__":
    main()
