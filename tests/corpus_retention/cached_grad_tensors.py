# source: https://github.com/deepchecks/deepchecks/pull/1341 (cached tensors that still had their grads)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +27,648 B/step peak tensor memory, +3 graph nodes/step held by globals; twin +4,608 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
segmenter = torch.nn.Conv2d(3, 5, 3, padding=1)
opt = torch.optim.SGD(segmenter.parameters(), lr=0.01)
prediction_cache = {}
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    images = torch.randn(2, 3, 24, 24)
    masks = segmenter(images)
    loss = masks.logsumexp(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    scores = masks.softmax(1).amax(1)
    prediction_cache[step] = scores  # CULPRIT FIX: prediction_cache[step] = scores.detach()
print(len(prediction_cache))
