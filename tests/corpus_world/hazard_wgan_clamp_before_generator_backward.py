# source: https://github.com/jiamings/wgan/issues/2
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# WGAN weight clipping through p.data.clamp_ placed between the generator's
# forward through the critic and its backward: the critic weights saved for
# the generator's gradient are clipped silently.
import torch
import torch.nn as nn

torch.manual_seed(0)
G = nn.Linear(2, 2)
C = nn.Linear(2, 1)
z = torch.randn(8, 2)
loss_g = -C(G(z)).mean()  # <- saved
for p in C.parameters():
    p.data.clamp_(-0.01, 0.01)  # <- culprit
loss_g.backward()  # <- backward
print("grad", G.weight.grad.flatten())
