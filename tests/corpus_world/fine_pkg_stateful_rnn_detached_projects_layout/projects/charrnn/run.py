import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from rnnlib.model import StatefulRNN  # noqa: E402

torch.manual_seed(0)
model = StatefulRNN(3, 5)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    loss = model(torch.randn(2, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ok", loss.item())
