# source: https://pytorch.org/docs/stable/generated/torch.vmap.html
# expect-kind: functorch-transform
# The weights are meant to be shared by every example, but vmap maps over their first dimension too.
import torch

weights = torch.randn(3, 4)
examples = torch.randn(10, 4)


def project(w, x):
    return w @ x


print(torch.vmap(project)(weights, examples).shape)  # <- culprit
