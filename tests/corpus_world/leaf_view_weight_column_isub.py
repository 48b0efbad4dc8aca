# source: https://github.com/Hunter-DDM/knowledge-neurons/issues/14
# expect-kind: leaf-inplace
# Editing one column of a Linear weight with -= outside torch.no_grad(): the
# column is a view of a leaf that requires grad.
import torch
import torch.nn as nn

torch.manual_seed(0)
dense = nn.Linear(4, 3)
pos = 2
emb = torch.randn(3)
dense.weight[:, pos] -= emb * 0.5  # <- culprit
print(dense.weight)
