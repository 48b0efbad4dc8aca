# source: https://github.com/quark0/darts/issues/56 (only backward(retain_graph=True) runs: the hidden state is never repackaged)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +35,712 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch


def train(steps):
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(8, 16)
    decoder = torch.nn.Linear(16, 8)
    params = list(lstm.parameters()) + list(decoder.parameters())
    hidden = (torch.zeros(1, 4, 16), torch.zeros(1, 4, 16))
    for step in range(steps):
        data = torch.randn(5, 4, 8)
        output, hidden = lstm(data, hidden)  # CULPRIT FIX: output, hidden = lstm(data, tuple(h.detach() for h in hidden))
        loss = decoder(output).pow(2).mean()
        for p in params:
            p.grad = None
        loss.backward(retain_graph=True)
        for p in params:  # the old char-rnn tutorials' update through .data
            p.data.add_(p.grad, alpha=-0.1)


train(int(os.environ.get("LEAK_STEPS", "12")))
print("ok")
