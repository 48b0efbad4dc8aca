# source: https://github.com/fastai/fastai/pull/1115
# expect-kind: none
# An in-place ReLU right after BatchNorm: BatchNorm's backward needs its input,
# not its output, so overwriting the output is safe.
import torch
import torch.nn as nn

torch.manual_seed(0)
block = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(inplace=True), nn.Conv2d(4, 1, 1))
x = torch.randn(2, 2, 5, 5)
loss = block(x).mean()
loss.backward()
print("grad", block[0].weight.grad.abs().sum().item())
