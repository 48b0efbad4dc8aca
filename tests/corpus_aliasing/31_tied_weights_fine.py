# Fine on its own (no bug twin): pytorch/examples word_language_model ties decoder.weight to encoder.weight in __init__, then initialises it in place
import torch


class RNNModel(torch.nn.Module):
    def __init__(self, ntoken=20, nhid=8):
        super().__init__()
        self.encoder = torch.nn.Embedding(ntoken, nhid)
        self.rnn = torch.nn.GRU(nhid, nhid)
        self.decoder = torch.nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight
        torch.nn.init.uniform_(self.encoder.weight, -0.1, 0.1)

    def forward(self, x):
        out, _ = self.rnn(self.encoder(x))
        return self.decoder(out)


torch.manual_seed(0)
model = RNNModel()
x = torch.randint(0, 20, (5, 2))
for step in range(2):
    model.zero_grad()
    model(x).sum().backward()
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-0.1)
print("TRUTH changed=%s" % (not torch.equal(model.decoder.weight, model.encoder.weight)))  # tied on purpose: they must stay one
