# From: segment-sum reports: out[seg] = out[seg] + values loses repeated segments (our own program)
import torch

seg = torch.tensor([0, 0, 1, 3, 3, 3])
values = torch.arange(6.0)
out = torch.zeros(4)
out[seg] = out[seg] + values  # <- culprit
expected = torch.zeros(4).index_add_(0, seg, values)
print("sums", out.tolist())
print("TRUTH changed=%s" % (not torch.equal(out, expected)))
