# source: https://github.com/jalola/improved-wgan-pytorch/issues/11
# expect-kind: gradient-shape-mismatch
# Old WGAN code passes `mone = one * -1` with one = torch.FloatTensor([1]) to
# backward(); the mean critic output is 0-dimensional, so the shapes differ.
import torch
import torch.nn as nn

torch.manual_seed(0)
aD = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
aG = nn.Linear(3, 6)
one = torch.FloatTensor([1])  # <- culprit-alt
mone = one * -1
fake_data = aG(torch.randn(4, 3))
gen_cost = aD(fake_data)
gen_cost = gen_cost.mean()
gen_cost.backward(mone)  # <- culprit <- backward
