# source: https://github.com/hbb1/2d-gaussian-splatting/issues/229
# expect-kind: invalid-gradient
# The rasterizer's custom backward in the package pads the rotation gradient to
# 4 columns (the quaternion layout) for an input that has 3.
import torch

from splat.rasterize import rasterize

torch.manual_seed(0)
means = torch.randn(5, 2, requires_grad=True)
rotations = torch.randn(5, 3, requires_grad=True)
image = rasterize(means, rotations)  # <- saved
loss = image.pow(2).mean()
loss.backward()  # <- backward
