# source: https://github.com/LiyuanLucasLiu/LD-Net/issues/6 (what is repackage_hidden? without it backward fails)
# expect-kind: backward-twice
# measured (torch 2.13.0+cpu, python alone): the leak raises RuntimeError 'Trying to backward through the graph a second time' at the second backward; the twin runs
import torch


class RNNModel(torch.nn.Module):
    def __init__(self, ntoken=20, nhid=16):
        super().__init__()
        self.encoder = torch.nn.Embedding(ntoken, nhid)
        self.rnn = torch.nn.LSTM(nhid, nhid)
        self.decoder = torch.nn.Linear(nhid, ntoken)

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(output), hidden


def train():
    torch.manual_seed(0)
    model = RNNModel()
    criterion = torch.nn.CrossEntropyLoss()
    hidden = (torch.zeros(1, 4, 16), torch.zeros(1, 4, 16))
    data = torch.randint(0, 20, (12, 4))
    for i in range(0, 10, 5):
        x, target = data[i:i + 5], data[i + 1:i + 6]
        model.zero_grad()
        output, hidden = model(x, hidden)  # CULPRIT FIX: output, hidden = model(x, tuple(h.detach() for h in hidden))
        loss = criterion(output.view(-1, 20), target.reshape(-1))
        loss.backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-0.1)


train()
