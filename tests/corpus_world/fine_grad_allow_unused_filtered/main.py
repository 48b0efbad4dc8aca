# source: https://github.com/learnables/learn2learn/issues/363
# expect-kind: none
# A MAML-style inner step over a model with an unused auxiliary head: the
# gradient is taken with allow_unused=True and parameters without one are kept.
import torch
import torch.nn.functional as F

from meta.net import ResNetLike
from meta.inner import adapted_params

torch.manual_seed(0)
net = ResNetLike()
x, y = torch.randn(6, 10), torch.randint(0, 4, (6,))
params = adapted_params(net, F.cross_entropy(net(x), y), lr=0.1)
print(len(params), sum(p.requires_grad for p in params))
