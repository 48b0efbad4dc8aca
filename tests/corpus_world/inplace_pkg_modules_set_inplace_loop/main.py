# source: https://github.com/qianyu-dlut/MVANet/issues/2
# expect-kind: inplace-modified-saved-tensor
# expect-node: SigmoidBackward0
# The training script flips every ReLU in the model package to inplace=True to
# save memory; one of them runs on a sigmoid gate that was saved for backward.
import torch
import torch.nn as nn

from mvanet.model import GatedBlock

torch.manual_seed(0)
model = GatedBlock(5)
for m in model.modules():
    if isinstance(m, nn.ReLU):
        m.inplace = True  # <- culprit-alt
out = model(torch.randn(3, 5))
out.sum().backward()  # <- backward
