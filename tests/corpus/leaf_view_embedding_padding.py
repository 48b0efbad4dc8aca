# expect-kind: leaf-inplace
# Zeroing the padding row of an embedding table by item assignment: the row is
# a view of a leaf parameter that requires grad.
import torch
import torch.nn as nn

torch.manual_seed(0)
emb = nn.Embedding(10, 4)
emb.weight[0] = 0.0  # <- culprit
tokens = torch.tensor([[0, 3, 5], [2, 0, 7]])
out = emb(tokens).sum()
out.backward()
