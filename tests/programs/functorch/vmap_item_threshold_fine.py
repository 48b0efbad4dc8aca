# expect-kind: none
# The fixed twin of vmap_item_threshold.py: the rule stays a tensor expression.
import torch


def clip_example(g, max_norm=1.0):
    norm = g.norm()
    scale = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    return g * scale


grads = torch.randn(32, 10)
print(torch.vmap(clip_example)(grads).shape)
