# source: https://github.com/muzairkhattak/PromptSRC/issues/6
# expect-kind: non-scalar-backward
# With several devices the wrapped model returns one loss per replica (as
# nn.DataParallel gathers them); the trainer calls backward on the vector.
import torch
import torch.nn as nn

torch.manual_seed(0)
prompt_learner = nn.Linear(8, 4)
opt = torch.optim.SGD(prompt_learner.parameters(), lr=0.002)


def replica_loss(chunk, labels):
    return nn.functional.cross_entropy(prompt_learner(chunk), labels)


images = torch.randn(6, 8)
labels = torch.randint(0, 4, (6,))
loss = torch.stack([replica_loss(c, l) for c, l in zip(images.chunk(2), labels.chunk(2))])  # <- culprit-alt
opt.zero_grad()
loss.backward()  # <- culprit <- backward
opt.step()
