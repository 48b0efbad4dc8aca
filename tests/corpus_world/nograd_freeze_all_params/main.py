# source: https://github.com/cfzd/Ultra-Fast-Lane-Detection/issues/282
# expect-kind: no-grad-fn
# Fine-tuning: the helper meant to freeze the backbone walks every parameter of
# the network, the new classification head included.
import torch

from lanenet.net import LaneNet
from lanenet.finetune import load_and_freeze

torch.manual_seed(0)
net = LaneNet()
load_and_freeze(net, net.state_dict())
opt = torch.optim.SGD(net.parameters(), lr=0.01)
imgs = torch.randn(2, 3, 16, 16)
target = torch.randint(0, 5, (2,))
out = net(imgs)
loss = torch.nn.functional.cross_entropy(out, target)
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
