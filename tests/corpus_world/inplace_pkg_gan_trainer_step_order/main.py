# source: https://blog.csdn.net/odbej/article/details/125158288
# expect-kind: inplace-modified-saved-tensor
# expect-node: AddmmBackward0
# The GAN trainer lives in a package beside the script; it steps the
# discriminator's optimizer before the generator loss (built on the same
# discriminator forward) is backpropagated.
import torch

from gan.nets import make_nets
from gan.trainer import train_step

torch.manual_seed(0)
G, D = make_nets()
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
print(train_step(G, D, opt_g, opt_d, torch.randn(8, 2)))
