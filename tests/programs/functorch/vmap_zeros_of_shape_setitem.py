# source: https://github.com/pytorch/pytorch/issues/103329
# expect-kind: vmap-inplace
# A per-example function builds its output with torch.zeros(x.shape): inside vmap, x.shape is the
# shape of one example, so the new tensor is not batched, and writing a batched value into it fails.
import torch


def pairwise_feature(x, y):
    feat = torch.zeros(x.shape)  # <- created
    feat[0, 0] = feat[0, 1] + x[0, 0] * y[0, 0]  # <- culprit
    return feat


xs = torch.ones(10, 5, 6)
ys = torch.ones(10, 5, 6)
out = torch.vmap(pairwise_feature)(xs, ys)
print(out.shape)
