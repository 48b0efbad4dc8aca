# Twin of log_prior_added_in_loss.py: add-one smoothing keeps every log-prior finite.
# expect: clean
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
ntokens = 12
emb, dec = nn.Embedding(ntokens, 8), nn.Linear(8, ntokens)
opt = torch.optim.SGD(list(emb.parameters()) + list(dec.parameters()), lr=0.1)
prior_text = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 1, 2])  # no token 8 to 11
counts = torch.bincount(prior_text, minlength=ntokens).float()
log_prior = torch.log((counts + 1) / (counts + 1).sum())
criterion = nn.NLLLoss()


def train_step(data, targets):
    output = F.log_softmax(dec(emb(data)), dim=-1)
    loss = criterion(output + log_prior, targets)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


for step in range(3):
    data = torch.randint(0, ntokens, (6,))
    print("loss", train_step(data, (data + 4) % ntokens))
