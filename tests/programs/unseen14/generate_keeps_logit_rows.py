# From: huggingface/transformers#34796 and #34813 (generation keeps the last position's logits; sliced
# without a copy, the row keeps the whole (batch, seq, vocab) logits alive), rewritten as a nanoGPT-style
# sampling loop under torch.no_grad(): no backward call. Our own program.
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +2,097,168 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +32,784 B/step, +0 nodes/step
# expect-kind: view-pins-storage
import os

import torch

torch.manual_seed(0)
V, D = 4096, 64
model = torch.nn.Sequential(torch.nn.Embedding(V, D), torch.nn.Linear(D, V))
idx = torch.randint(0, V, (2, 64))
kept = []
with torch.no_grad():
    for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
        logits = model(idx[:, -64:])
        last = logits[:, -1, :]
        kept.append(last)  # CULPRIT FIX: kept.append(last.clone())
        nxt = torch.multinomial(torch.softmax(last, dim=-1), 1)
        idx = torch.cat([idx, nxt], dim=1)
print("generated", idx.shape[1] - 64, "tokens; kept", len(kept), "rows")
