# From: torch.asarray docs (shares memory with an array when it can; our own program)
import numpy as np
import torch

scores = np.array([0.2, 0.9, 0.4, 0.7], dtype=np.float32)
raw = torch.asarray(scores)
ref = raw.clone()
torch.from_numpy(scores).clamp_(max=0.5)  # <- culprit
print("raw max", raw.max().item())
print("TRUTH changed=%s" % (not torch.equal(raw, ref)))
