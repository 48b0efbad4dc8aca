# Rewritten from pytorch/examples word_language_model with a unigram prior added to the model's log-probabilities (our own program): a token the prior's text never holds has count 0, so its log-prior is -inf, entering the loss through an add that saves nothing.
# expect: kind=silent-non-finite-value line=13 op=log phase=forward sink=loss sink_line=21 sink_step=0
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
ntokens = 12
emb, dec = nn.Embedding(ntokens, 8), nn.Linear(8, ntokens)
opt = torch.optim.SGD(list(emb.parameters()) + list(dec.parameters()), lr=0.1)
prior_text = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 1, 2])  # no token 8 to 11
counts = torch.bincount(prior_text, minlength=ntokens).float()
log_prior = torch.log(counts / counts.sum())
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
