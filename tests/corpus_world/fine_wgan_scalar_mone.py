# source: https://github.com/jalola/improved-wgan-pytorch/issues/11
# expect-kind: none
# The sign gradient given to backward is a 0-dimensional tensor, matching the
# mean critic output.
import torch
import torch.nn as nn

torch.manual_seed(0)
aD = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
aG = nn.Linear(3, 6)
one = torch.tensor(1.0)
mone = one * -1
gen_cost = aD(aG(torch.randn(4, 3))).mean()
gen_cost.backward(mone)
print("grad", aG.weight.grad.shape)
