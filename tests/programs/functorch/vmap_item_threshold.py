# source: https://github.com/pytorch/functorch/issues/257
# expect-kind: functorch-transform
# A per-example clipping rule reads the example's norm with .item() to decide in Python; inside
# vmap there is no single number to return.
import torch


def clip_example(g, max_norm=1.0):
    norm = g.norm().item()  # <- culprit
    scale = min(1.0, max_norm / (norm + 1e-6))
    return g * scale


grads = torch.randn(32, 10)
print(torch.vmap(clip_example)(grads).shape)
