# Twin of 27: the checkpointed block is in eval mode (frozen BatchNorm, as when fine-tuning), so no statistics move
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
net = Block().eval()
ref = copy.deepcopy(net)
images = torch.randn(4, 3, 8, 8, requires_grad=True)
loss = checkpoint(net, images, use_reentrant=True).mean()
loss.backward()
with torch.no_grad():
    ref(images)
print("TRUTH changed=%s" % (not torch.allclose(net.bn.running_var, ref.bn.running_var)))
