# expect-kind: inplace-modified-saved-tensor
# expect-node: SigmoidBackward0
# A module applies nn.ReLU(inplace=True) to a sigmoid output; sigmoid saved
# that output, so the in-place ReLU invalidates it.
import torch
import torch.nn as nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.act = nn.ReLU(inplace=True)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        g = torch.sigmoid(self.fc(x))  # <- saved
        g = self.act(g)  # <- culprit
        return self.head(g)


torch.manual_seed(0)
model = Gate()
x = torch.randn(5, 4)
loss = model(x).pow(2).mean()
loss.backward()  # <- backward
