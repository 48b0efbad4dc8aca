# From: functional-style inference code (weights held as plain tensors, the model a Python function, as in
# nanoGPT-style exports and torch.func users) that collects features per batch for a kNN evaluation and keeps
# every one (lucidrains/memorizing-transformers-pytorch's growing memories): no module is called, no backward
# runs. Our own program.
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +131,072 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
# expect-kind: container-grows
import os

import torch

torch.manual_seed(0)
W1, W2 = torch.randn(32, 256), torch.randn(256, 256)


def encode(x):
    return torch.tanh(x @ W1) @ W2


feats = []
with torch.inference_mode():
    for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
        f = encode(torch.randn(128, 32))
        feats.append(f)  # CULPRIT FIX: feats = [f]
print("kept", len(feats), "feature batches")
