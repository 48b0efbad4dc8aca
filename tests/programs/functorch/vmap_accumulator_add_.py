# source: https://github.com/facebookresearch/theseus/issues/650
# expect-kind: vmap-inplace
# An error function vmapped over a batch accumulates per-example residuals into a buffer it made
# with torch.zeros; the in-place add of a batched value into an unbatched buffer is refused.
import torch


def residual(pose, target):
    err = torch.zeros(3)  # <- created
    for k in range(3):
        err.add_((pose[k] - target[k]) ** 2)  # <- culprit
    return err


poses = torch.randn(8, 3, 3)
targets = torch.randn(8, 3, 3)
print(torch.func.vmap(residual)(poses, targets).shape)
