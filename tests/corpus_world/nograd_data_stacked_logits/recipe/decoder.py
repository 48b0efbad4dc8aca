import torch
import torch.nn as nn


class GreedyDecoder(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.cell = nn.GRUCell(hidden, hidden)
        self.embed = nn.Embedding(vocab, hidden)
        self.out = nn.Linear(hidden, vocab)

    def sample(self, features, steps):
        h = features
        inp = torch.zeros_like(features)
        logits = []
        for _ in range(steps):
            h = self.cell(inp, h)
            step_logits = self.out(h)
            logits.append(step_logits)
            inp = self.embed(step_logits.argmax(dim=1))
        logits = torch.stack(logits, 1).data  # <- culprit
        return logits
