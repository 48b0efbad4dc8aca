# source: https://github.com/pytorch/pytorch/issues/186301
# expect-kind: functorch-transform
# A validation helper branches in Python on a tensor (any NaN?) and is called inside vmap.
import torch


def validate(x):
    if x.isnan().any():  # <- culprit
        raise RuntimeError("NaN detected")


def double(x):
    validate(x)
    return x * 2


batch = torch.randn(4, 8)
print(double(batch[0]).shape)
print(torch.func.vmap(double)(batch).shape)
