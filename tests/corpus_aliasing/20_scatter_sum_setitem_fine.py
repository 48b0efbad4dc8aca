# Twin of 20: index_put_ with accumulate=True
import torch

seg = torch.tensor([0, 0, 1, 3, 3, 3])
values = torch.arange(6.0)
out = torch.zeros(4)
out.index_put_((seg,), values, accumulate=True)
expected = torch.zeros(4).index_add_(0, seg, values)
print("sums", out.tolist())
print("TRUTH changed=%s" % (not torch.equal(out, expected)))
