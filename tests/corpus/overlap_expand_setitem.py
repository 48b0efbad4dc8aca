# expect-kind: overlapping-write
# Writing one column of an expand()ed mask: every row is the same memory.
import torch


def make_mask(n, width):
    row = torch.ones(1, width)
    mask = row.expand(n, width)
    mask[:, 0] = 0.0  # <- culprit
    return mask


print(make_mask(4, 5))
