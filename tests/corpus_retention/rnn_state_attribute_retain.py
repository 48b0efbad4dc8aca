# source: https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57 (the hidden state kept without h_state.data; retain_graph=True "fixes" the error)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +1,448 B/step peak tensor memory, +46 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch


class RNNRegressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.RNN(1, 32, batch_first=True)
        self.out = torch.nn.Linear(32, 1)
        self.h_state = None

    def forward(self, x):
        r_out, h = self.rnn(x, self.h_state)
        self.h_state = h  # CULPRIT FIX: self.h_state = h.detach()
        return self.out(r_out)


torch.manual_seed(0)
model = RNNRegressor()
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    t = torch.linspace(step, step + 1, 10).view(1, 10, 1)
    pred = model(torch.sin(t))
    loss = torch.nn.functional.mse_loss(pred, torch.cos(t))
    model.zero_grad()
    loss.backward(retain_graph=True)
    for p in model.parameters():  # the tutorial's update through .data
        p.data.add_(p.grad, alpha=-0.02)
print("trained")
