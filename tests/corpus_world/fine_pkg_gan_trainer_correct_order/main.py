# source: https://blog.csdn.net/odbej/article/details/125158288
# expect-kind: none
# The GAN trainer package in the order the report recommends: the generator
# loss uses a fresh discriminator forward after the discriminator's step.
import torch

from gan.trainer import train_step

torch.manual_seed(0)
G = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
D = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.LeakyReLU(0.2), torch.nn.Linear(8, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
print(train_step(G, D, opt_g, opt_d, torch.randn(8, 2)))
