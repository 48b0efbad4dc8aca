# Thirty Adam steps (recorded whole once the step line has used its detailed events), then the
# optimizer step taken between the two backward calls of one forward pass: Adam rewrites the second
# layer's weight, which addmm saved.
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 2))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
x = torch.randn(10, 3)
for step in range(31):
    opt.zero_grad()
    out = model(x)  # <- saved
    loss_main = out.pow(2).mean()
    loss_aux = out.abs().mean()
    loss_main.backward(retain_graph=True)
    opt.step()  # <- culprit
    if step == 30 and "--fixed" not in sys.argv:
        loss_aux.backward()  # <- backward
print("done")
