# source: https://github.com/ShiYunyi/Meta-Weight-Net_Code-Optimization/issues/5
# expect-kind: unused-input
# The pseudo-update takes the gradient w.r.t. every parameter of the network
# with create_graph=True; the model in the package has an auxiliary head that
# this forward pass never uses.
import torch
import torch.nn.functional as F

from meta.net import ResNetLike

torch.manual_seed(0)
pseudo_net = ResNetLike()
x = torch.randn(6, 10)
y = torch.randint(0, 4, (6,))
pseudo_loss = F.cross_entropy(pseudo_net(x), y)
pseudo_grads = torch.autograd.grad(pseudo_loss, pseudo_net.parameters(), create_graph=True)  # <- backward
print(len(pseudo_grads))
