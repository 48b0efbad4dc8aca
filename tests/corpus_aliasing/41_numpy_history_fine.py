# Twin of 41: each epoch's array copied when it is kept
import numpy as np
import torch

torch.manual_seed(0)
scores = torch.zeros(3)
history, expected = [], []
for epoch in range(4):
    scores.mul_(0.5).add_(torch.rand(3))
    history.append(scores.numpy().copy())
    expected.append(scores.clone())
print("epochs kept:", len(history))
print("TRUTH changed=%s" % (not np.array_equal(history[0], expected[0].numpy())))
