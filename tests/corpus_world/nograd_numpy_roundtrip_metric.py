# source: https://github.com/delira-dev/delira/issues/40
# expect-kind: no-grad-fn
# The per-sample error goes through a NumPy helper (tensor -> numpy -> tensor):
# what comes back through torch.from_numpy has no graph to the network.
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
net = nn.Linear(5, 3)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(4, 5)
y = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
pred = net(x)
err = ((pred - torch.from_numpy(y)) ** 2).mean(dim=1)
err = torch.from_numpy(np.asarray(err.detach().cpu().numpy()))  # <- culprit
loss = err.mean()
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
