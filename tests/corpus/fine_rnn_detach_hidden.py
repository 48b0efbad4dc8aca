# expect-kind: none
# Truncated BPTT done right: the carried hidden state is detached every step.
import torch
import torch.nn as nn

torch.manual_seed(0)
cell = nn.RNNCell(3, 5)
head = nn.Linear(5, 1)
opt = torch.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.01)
data = torch.randn(6, 2, 3)
targets = torch.randn(6, 2, 1)
h = torch.zeros(2, 5)
for step in range(6):
    h = cell(data[step], h.detach())
    loss = (head(h) - targets[step]).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
