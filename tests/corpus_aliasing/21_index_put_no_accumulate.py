# From: pytorch/pytorch#143116 (index_put_ is undefined for repeated indices without accumulate; our own program)
import torch

grad_table = torch.zeros(5, 2)
rows = torch.tensor([4, 1, 4])
updates = torch.ones(3, 2)
grad_table.index_put_((rows,), updates)  # <- culprit
expected = torch.zeros(5, 2).index_add_(0, rows, updates)
print("table", grad_table.tolist())
print("TRUTH changed=%s" % (not torch.equal(grad_table, expected)))
