"""A recurrent hidden state carried across batches without `detach()`: the second backward reaches
the previous batch's graph, whose saved weights `opt.step()` has since updated in place."""
import torch

torch.manual_seed(0)
rnn = torch.nn.RNNCell(3, 5)
head = torch.nn.Linear(5, 1)
opt = torch.optim.SGD(list(rnn.parameters()) + list(head.parameters()), lr=0.1)
hidden = torch.zeros(2, 5)
for batch in range(4):
    x = torch.randn(2, 3)
    hidden = rnn(x, hidden)
    loss = head(hidden).pow(2).mean()
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
