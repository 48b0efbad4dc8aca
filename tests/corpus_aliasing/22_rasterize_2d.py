# From: dotnet/TorchSharp#1374 (rasterising 2-D points with repeats onto a canvas; our own program)
import torch

canvas = torch.zeros(3, 3)
ys = torch.tensor([0, 1, 1, 2])
xs = torch.tensor([0, 2, 2, 1])
canvas[ys, xs] += 1.0  # <- culprit
expected = torch.zeros(3, 3).index_put_((ys, xs), torch.ones(4), accumulate=True)
print("canvas", canvas.tolist())
print("TRUTH changed=%s" % (not torch.equal(canvas, expected)))
