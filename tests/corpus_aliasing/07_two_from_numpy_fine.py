# Twin of 07: the kept tensor owns a copy of the array
import numpy as np
import torch

a = np.arange(6, dtype=np.float32)
original = torch.tensor(a)
ref = original.clone()
work = torch.from_numpy(a)
work.mul_(10)
print("original", original.tolist())
print("TRUTH changed=%s" % (not torch.equal(original, ref)))
