# expect-kind: backward-twice
# expect-alias: h
# expect-node: TanhBackward0
# Truncated BPTT without truncation: the hidden state `h` is carried from one
# iteration to the next without .detach(), so the second backward walks into the
# previous iteration's graph, which the first backward already freed.
import torch
import torch.nn as nn

torch.manual_seed(0)
cell = nn.RNNCell(3, 5)
head = nn.Linear(5, 1)
params = list(cell.parameters()) + list(head.parameters())
opt = torch.optim.SGD(params, lr=0.01)
data = torch.randn(4, 2, 3)
targets = torch.randn(4, 2, 1)
h = torch.zeros(2, 5)
for step in range(4):
    h = cell(data[step], h)  # <- saved <- culprit-alt
    loss = (head(h) - targets[step]).pow(2).mean()
    opt.zero_grad()
    loss.backward()  # <- culprit <- backward
    opt.step()
    print(step, loss.item())
