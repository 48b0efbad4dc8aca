# Twin of 21: the rows are distinct, so nothing is dropped
import torch

grad_table = torch.zeros(5, 2)
rows = torch.tensor([4, 1, 3])
updates = torch.ones(3, 2)
grad_table.index_put_((rows,), updates)
expected = torch.zeros(5, 2).index_add_(0, rows, updates)
print("table", grad_table.tolist())
print("TRUTH changed=%s" % (not torch.equal(grad_table, expected)))
