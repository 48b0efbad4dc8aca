# From: ".numpy() then from_numpy" memory-sharing reports (our own program)
import torch

w = torch.ones(4)
arr = w.numpy()
kept = torch.from_numpy(arr)
ref = kept.clone()
w.mul_(3)  # <- culprit
print("kept", kept.tolist())
print("TRUTH changed=%s" % (not torch.equal(kept, ref)))
