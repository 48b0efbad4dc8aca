# From: pytorch/pytorch#19197 and forum reports: counts[idx] += 1 undercounts repeated indices (our own program)
import torch

labels = torch.tensor([0, 2, 2, 1, 2, 0])
counts = torch.zeros(3)
counts[labels] += 1  # <- culprit
expected = torch.zeros(3).index_add_(0, labels, torch.ones(6))
print("counts", counts.tolist())
print("TRUTH changed=%s" % (not torch.equal(counts, expected)))
