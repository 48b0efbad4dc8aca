# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-node: SigmoidBackward0
# A "numerically safe" sigmoid that clamps its output through .data inside
# forward(): sigmoid's backward then uses the clamped output, silently.
import torch
import torch.nn as nn


class SafeSigmoid(nn.Module):
    def forward(self, x):
        y = torch.sigmoid(x)  # <- saved
        y.data.clamp_(0.1, 0.9)  # <- culprit
        return y


torch.manual_seed(0)
layer = nn.Sequential(nn.Linear(3, 3), SafeSigmoid())
x = torch.randn(4, 3) * 5
loss = layer(x).sum()
loss.backward()  # <- backward
print(layer[0].weight.grad)
