# expect-kind: none
# The ResNet pattern: BatchNorm followed by ReLU(inplace=True). BatchNorm saves
# its input and statistics, not its output, so the in-place ReLU is safe.
import torch
import torch.nn as nn


class ConvBlock(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


torch.manual_seed(0)
block = ConvBlock(2, 4)
x = torch.randn(2, 2, 6, 6)
block(x).mean().backward()
print(block.conv.weight.grad.shape)
