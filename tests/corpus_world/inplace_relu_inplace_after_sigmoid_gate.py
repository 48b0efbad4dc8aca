# source: https://github.com/osmr/imgclsmob/issues/13
# expect-kind: inplace-modified-saved-tensor
# expect-node: SigmoidBackward0
# A module keeps one nn.ReLU(inplace=True) and applies it to a gate that
# sigmoid has already saved for backward.
import torch
import torch.nn as nn

torch.manual_seed(0)
fc = nn.Linear(4, 4)
activ = nn.ReLU(inplace=True)
x = torch.randn(2, 4)
gate = torch.sigmoid(fc(x))  # <- saved
gate = activ(gate)  # <- culprit
loss = gate.sum()
loss.backward()  # <- backward
print("grad", fc.weight.grad.sum().item())
