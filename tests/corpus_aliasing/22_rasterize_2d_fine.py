# Twin of 22: index_put_ with accumulate=True
import torch

canvas = torch.zeros(3, 3)
ys = torch.tensor([0, 1, 1, 2])
xs = torch.tensor([0, 2, 2, 1])
canvas.index_put_((ys, xs), torch.ones(4), accumulate=True)
expected = torch.zeros(3, 3).index_put_((ys, xs), torch.ones(4), accumulate=True)
print("canvas", canvas.tolist())
print("TRUTH changed=%s" % (not torch.equal(canvas, expected)))
