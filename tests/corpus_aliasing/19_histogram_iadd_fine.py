# Twin of 19: index_add_ accumulates every update
import torch

labels = torch.tensor([0, 2, 2, 1, 2, 0])
counts = torch.zeros(3)
counts.index_add_(0, labels, torch.ones(6))
expected = torch.zeros(3).index_add_(0, labels, torch.ones(6))
print("counts", counts.tolist())
print("TRUTH changed=%s" % (not torch.equal(counts, expected)))
