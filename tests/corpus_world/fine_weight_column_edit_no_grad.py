# source: https://github.com/Hunter-DDM/knowledge-neurons/issues/14
# expect-kind: none
# Editing a weight column inside torch.no_grad(), then training: the edit is
# not recorded and nothing saved is modified.
import torch
import torch.nn as nn

torch.manual_seed(0)
dense = nn.Linear(4, 3)
with torch.no_grad():
    dense.weight[:, 2] -= torch.randn(3) * 0.5
loss = dense(torch.randn(2, 4)).pow(2).sum()
loss.backward()
print("grad", dense.weight.grad.sum().item())
