import torch.nn as nn


class Policy(nn.Module):
    def __init__(self, hidden, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.head = nn.Linear(hidden, vocab)
