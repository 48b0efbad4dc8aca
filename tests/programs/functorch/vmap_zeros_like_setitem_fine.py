# expect-kind: none
# The fixed twin of vmap_zeros_of_shape_setitem.py: zeros_like(x) is batched like x.
import torch


def pairwise_feature(x, y):
    feat = torch.zeros_like(x)
    feat[0, 0] = feat[0, 1] + x[0, 0] * y[0, 0]
    return feat


xs = torch.ones(10, 5, 6)
ys = torch.ones(10, 5, 6)
out = torch.vmap(pairwise_feature)(xs, ys)
print(out.shape, out[0, 0, 0].item())
