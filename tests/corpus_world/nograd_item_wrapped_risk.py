# source: https://github.com/v-mipeng/LexiconNER/issues/7
# expect-kind: no-grad-fn
# The risk helper returns Python floats (.item()); the "fix" of wrapping them
# back into tensors gives a loss that no longer has a graph.
import torch
import torch.nn as nn

torch.manual_seed(0)
tagger = nn.Linear(10, 2)
opt = torch.optim.SGD(tagger.parameters(), lr=0.1)


def pu_risk(logits, labels):
    prob = logits.softmax(dim=1)[:, 1]
    pos = (labels == 1).float()
    p_risk = ((1 - prob) * pos).sum() / pos.sum().clamp(min=1)
    n_risk = (prob * (1 - pos)).sum() / (1 - pos).sum().clamp(min=1)
    return p_risk.item(), n_risk.item()  # <- culprit


words = torch.randn(12, 10)
labels = torch.randint(0, 2, (12,))
p_risk, n_risk = pu_risk(tagger(words), labels)
risk = torch.tensor(p_risk) + torch.tensor(n_risk)  # <- culprit-alt
opt.zero_grad()
risk.backward()  # <- backward
opt.step()
