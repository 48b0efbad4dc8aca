# From: "from_numpy shares memory" reports (two tensors over one array; our own program)
import numpy as np
import torch

a = np.arange(6, dtype=np.float32)
original = torch.from_numpy(a)
ref = original.clone()
work = torch.from_numpy(a)
work.mul_(10)  # <- culprit
print("original", original.tolist())
print("TRUTH changed=%s" % (not torch.equal(original, ref)))
