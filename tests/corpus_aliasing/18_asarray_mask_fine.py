# Twin of 18: the clamp made out of place
import numpy as np
import torch

scores = np.array([0.2, 0.9, 0.4, 0.7], dtype=np.float32)
raw = torch.asarray(scores)
ref = raw.clone()
clipped = torch.from_numpy(scores).clamp(max=0.5)
print("raw max", raw.max().item(), clipped.max().item())
print("TRUTH changed=%s" % (not torch.equal(raw, ref)))
