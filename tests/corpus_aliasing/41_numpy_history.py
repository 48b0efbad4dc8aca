# From: "every array I appended from tensor.numpy() shows the last values" (a loss curve of per-class
# scores kept as NumPy arrays of one buffer the loop updates in place; our own program)
import numpy as np
import torch

torch.manual_seed(0)
scores = torch.zeros(3)
history, expected = [], []
for epoch in range(4):
    scores.mul_(0.5).add_(torch.rand(3))  # <- culprit
    history.append(scores.numpy())
    expected.append(scores.clone())
print("epochs kept:", len(history))
print("TRUTH changed=%s" % (not np.array_equal(history[0], expected[0].numpy())))
