# source: https://github.com/archinetai/smart-pytorch/issues/5
# expect-kind: unused-input
# SMART regularisation: the noise is added to the embeddings, but the eval
# function given to the loss re-embeds the token ids and ignores the perturbed
# embeddings, so the gradient w.r.t. the noise does not exist.
import torch
import torch.nn as nn

from smart.loss import SMARTLoss

torch.manual_seed(0)
embedding = nn.Embedding(20, 8)
encoder = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))
ids = torch.randint(0, 20, (4, 5))


def eval_fn(embed):
    return encoder(embedding(ids).mean(1))  # <- culprit


embed = embedding(ids)
state = eval_fn(embed)
loss = SMARTLoss(eval_fn)(embed, state)
print(loss)
