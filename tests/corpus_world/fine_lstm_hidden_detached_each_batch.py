# source: https://learn.biosrag.com/ai/rnn-training-4.html
# expect-kind: none
# Truncated BPTT done right: the carried LSTM state is detached before each new
# segment's forward.
import torch
import torch.nn as nn

torch.manual_seed(0)
lstm = nn.LSTM(3, 4)
opt = torch.optim.SGD(lstm.parameters(), lr=0.01)
hidden = (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
for batch in range(3):
    hidden = tuple(h.detach() for h in hidden)
    out, hidden = lstm(torch.randn(5, 2, 3), hidden)
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ok", loss.item())
