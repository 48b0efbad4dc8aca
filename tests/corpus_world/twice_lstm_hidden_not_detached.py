# source: https://learn.biosrag.com/ai/rnn-training-4.html
# expect-kind: backward-twice
# Truncated BPTT without truncation: the LSTM state (h, c) carried into the
# next batch still points at the previous batch's freed graph.
import torch
import torch.nn as nn

torch.manual_seed(0)
lstm = nn.LSTM(3, 4)
opt = torch.optim.SGD(lstm.parameters(), lr=0.01)
hidden = (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
for batch in range(3):
    x = torch.randn(5, 2, 3)
    out, new_hidden = lstm(x, hidden)  # <- culprit-alt
    hidden = new_hidden  # <- culprit
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()  # <- backward
    opt.step()
