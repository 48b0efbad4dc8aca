# source: the common "collect a block's activations with a one-line lambda hook" pattern (a trainer that runs many steps while the list grows); our own program
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +8,192 B/step peak tensor memory, +8 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = torch.nn.Linear(d, d)

    def forward(self, x):
        return x + torch.tanh(self.fc(x))


torch.manual_seed(0)
model = torch.nn.Sequential(Block(32), Block(32), torch.nn.Linear(32, 4))
acts = []
model[1].register_forward_hook(lambda m, i, o: acts.append(o))  # CULPRIT FIX: model[1].register_forward_hook(lambda m, i, o: acts.append(o.detach().norm().item()))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("activations kept", len(acts))
