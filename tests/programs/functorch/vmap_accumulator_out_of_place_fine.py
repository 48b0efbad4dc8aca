# expect-kind: none
# The fixed twin of vmap_accumulator_add_.py: the out-of-place add makes `err` batched.
import torch


def residual(pose, target):
    err = torch.zeros(3)
    for k in range(3):
        err = err + (pose[k] - target[k]) ** 2
    return err


poses = torch.randn(8, 3, 3)
targets = torch.randn(8, 3, 3)
print(torch.func.vmap(residual)(poses, targets).shape)
