# source: https://github.com/chr5tphr/zennit/issues/58
# expect-kind: gradient-shape-mismatch
# The output relevance is built with the input's spatial size, but the U-Net
# crops its output, so the gradient given to backward has the wrong shape.
import torch
import torch.nn as nn

torch.manual_seed(0)
unet = nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU(), nn.Conv2d(4, 1, 3))
data = torch.randn(1, 2, 12, 12, requires_grad=True)
output = unet(data)
output_relevance = torch.zeros(1, 1, 12, 12)  # <- culprit-alt
output_relevance[:, -1] = 1.0
output.backward(gradient=output_relevance)  # <- culprit <- backward
print(data.grad)
