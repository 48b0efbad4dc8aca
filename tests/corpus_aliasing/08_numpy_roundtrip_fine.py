# Twin of 08: the array copied before from_numpy
import torch

w = torch.ones(4)
arr = w.numpy().copy()
kept = torch.from_numpy(arr)
ref = kept.clone()
w.mul_(3)
print("kept", kept.tolist())
print("TRUTH changed=%s" % (not torch.equal(kept, ref)))
