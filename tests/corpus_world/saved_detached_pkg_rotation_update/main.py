# source: https://github.com/lucidrains/invariant-point-attention/issues/9
# expect-kind: saved-detached-inplace
# A structure module in a package detaches its rotations in place between
# iterations; the previous iteration's product saved them.
import torch

from ipa.structure import refine

torch.manual_seed(0)
frames = torch.randn(4, 3, requires_grad=True)
coords = refine(frames, steps=2)
coords.sum().backward()  # <- backward
