# From: lucidrains/memorizing-transformers-pytorch (a kNN memory of past keys filled at every forward,
# cleared only by an explicit call) and the retrieval caches filled during evaluation that nobody bounds;
# here a feature cache keyed by batch in an inference loop (no backward). Our own program.
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +131,072 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
# expect-kind: container-grows
import os

import torch


class Retriever(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Linear(32, 512)
        self.cache = {}

    def forward(self, x, key):
        feats = self.enc(x)
        self.cache[key] = feats  # CULPRIT FIX: self.cache[key % 4] = feats
        return feats.norm(dim=1)


torch.manual_seed(0)
model = Retriever().eval()
total = 0.0
with torch.no_grad():
    for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
        total += float(model(torch.randn(64, 32), step).sum())
print("cached", len(model.cache), "batches; total %.1f" % total)
