# From: pytorch/pytorch#62471 and deepinsight/insightface#2053: checkpointed conv/BatchNorm blocks (reentrant) drift the running statistics (our own program)
import copy

import torch
from torch.utils.checkpoint import checkpoint


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


torch.manual_seed(0)
net = Block()
ref = copy.deepcopy(net)
images = torch.randn(4, 3, 8, 8, requires_grad=True)
loss = checkpoint(net, images, use_reentrant=True).mean()
loss.backward()  # <- culprit
with torch.no_grad():
    ref(images)
print("TRUTH changed=%s" % (not torch.allclose(net.bn.running_var, ref.bn.running_var)))
