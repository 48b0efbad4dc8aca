# source: https://github.com/PingoLH/FCHarDNet/issues/61
# expect-kind: leaf-inplace
# Copying fused weights into a conv with slice assignment: the slice is a view
# of the parameter, a leaf that requires grad.
import torch
import torch.nn as nn

torch.manual_seed(0)
cconv = nn.Conv2d(2, 2, 3)
W = torch.randn(2, 2, 3, 3)
cconv.weight[:, :, :, :] = W[:, :, :, :]  # <- culprit
print(cconv.weight.shape)
