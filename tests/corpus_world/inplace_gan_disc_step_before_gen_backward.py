# source: https://blog.csdn.net/odbej/article/details/125158288
# expect-kind: inplace-modified-saved-tensor
# expect-node: AddmmBackward0
# GAN loop: the discriminator's optimizer.step() updates D's weights in place,
# then the generator loss built on the same D forward is backpropagated.
import torch
import torch.nn as nn

torch.manual_seed(0)
G = nn.Linear(3, 2)
D = nn.Linear(2, 1)
opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
z = torch.randn(8, 3)
fake = G(z)
d_out = D(fake)  # <- saved
loss_d = d_out.mean()
opt_d.zero_grad()
loss_d.backward(retain_graph=True)
opt_d.step()  # <- culprit
loss_g = -d_out.mean()
loss_g.backward()  # <- backward
