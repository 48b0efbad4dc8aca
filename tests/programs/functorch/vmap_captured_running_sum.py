# source: https://github.com/pytorch/functorch/issues/1025
# expect-kind: vmap-inplace
# A tensor from outside the vmapped function (captured by the closure) is updated in place with each
# example's value: it is not batched, so vmap cannot write a batch of values into it.
import torch

running = torch.zeros(4)  # <- created


def score(x):
    running.mul_(0.9).add_(x.abs())  # <- culprit
    return x.sum()


batch = torch.randn(16, 4)
print(torch.vmap(score)(batch).shape)
