# source: https://github.com/pytorch/pytorch/issues/8109 (indexing one row of a batch keeps the whole storage)
# expect-kind: view-pins-storage
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +1,048,576 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +1,024 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
encoder = torch.nn.Linear(256, 256)
opt = torch.optim.SGD(encoder.parameters(), lr=0.01)
first_embeddings = []
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    batch = torch.randn(1024, 256)
    with torch.no_grad():
        emb = torch.tanh(encoder(batch) * 0.5)
    first_embeddings.append(emb[0])  # CULPRIT FIX: first_embeddings.append(emb[0].clone())
    loss = encoder(batch[:32]).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(len(first_embeddings))
