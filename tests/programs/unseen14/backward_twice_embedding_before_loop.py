# From: discuss.pytorch.org "Trying to backward through the graph a second time" threads where a feature or
# embedding is computed once before an inner optimisation loop (prompt tuning, few-step adaptation) and each
# inner step backpropagates through it again. Our own program.
# measured (torch 2.13.0+cpu): the leak raises RuntimeError "Trying to backward through the graph a second time" at
# the second iteration's loss.backward(); the twin (FIX applied) runs its 4 steps.
# expect-kind: backward-twice
import os

import torch

torch.manual_seed(0)
embed = torch.nn.Embedding(100, 16)
head = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(list(embed.parameters()) + list(head.parameters()), lr=0.1)
tokens = torch.randint(0, 100, (8, 5))
ctx = embed(tokens).mean(1)  # CULPRIT FIX: ctx = embed(tokens).mean(1).detach()
for step in range(int(os.environ.get("LEAK_STEPS", "4"))):
    loss = head(ctx).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done, loss %.4f" % loss.item())
