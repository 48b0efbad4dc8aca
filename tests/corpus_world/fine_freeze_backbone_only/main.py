# source: https://github.com/cfzd/Ultra-Fast-Lane-Detection/issues/282
# expect-kind: none
# Fine-tuning with only the backbone frozen (net.model), and the optimizer
# given the parameters that still require grad.
import torch

from lanenet.net import LaneNet
from lanenet.finetune import freeze_backbone

torch.manual_seed(0)
net = LaneNet()
freeze_backbone(net)
opt = torch.optim.SGD(filter(lambda p: p.requires_grad, net.parameters()), lr=0.01)
imgs, target = torch.randn(2, 3, 16, 16), torch.randint(0, 5, (2,))
loss = torch.nn.functional.cross_entropy(net(imgs), target)
opt.zero_grad()
loss.backward()
opt.step()
print(net.model[0].weight.grad is None, net.cls.weight.grad is not None)
