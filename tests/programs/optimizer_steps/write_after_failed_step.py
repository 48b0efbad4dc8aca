# Adam steps recorded whole, the last of which raises inside torch (a learning rate that is not a
# number: the step's first writes are made, then its arithmetic fails) and is caught; then a write on
# a program line into a weight that the next backward needs: it must be recorded as every write is.
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 2))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
x = torch.randn(10, 3)
for step in range(30):
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    if step == 29:
        opt.param_groups[0]["lr"] = "oops"
    try:
        opt.step()
    except TypeError as e:
        print("step failed:", type(e).__name__)
out = model(x)  # <- saved
loss = out.pow(2).mean()
if "--fixed" not in sys.argv:
    with torch.no_grad():
        model[2].weight.mul_(0.5)  # <- culprit
loss.backward()  # <- backward
print("done")
