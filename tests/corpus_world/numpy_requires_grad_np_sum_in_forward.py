# source: https://github.com/xiaxin1998/DHCN/issues/8
# expect-kind: numpy-requires-grad
# The hypergraph layers' outputs are summed with np.sum inside forward.
import numpy as np
import torch
import torch.nn as nn


class HyperConv(nn.Module):
    def __init__(self, dim, layers=2):
        super().__init__()
        self.weights = nn.ModuleList([nn.Linear(dim, dim, bias=False) for _ in range(layers)])

    def forward(self, adjacency, embedding):
        item_embeddings = embedding
        final = [item_embeddings]
        for w in self.weights:
            item_embeddings = adjacency @ w(item_embeddings)
            final.append(item_embeddings)
        item_embeddings = np.sum(final, 0)  # <- culprit
        return item_embeddings


torch.manual_seed(0)
conv = HyperConv(4)
adj = torch.rand(5, 5)
emb = nn.Parameter(torch.randn(5, 4))
out = conv(adj, emb)
print(out.shape)
