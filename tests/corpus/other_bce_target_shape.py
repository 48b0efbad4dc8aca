# expect-kind: other
# Target of shape [8] against predictions of shape [8, 1] in binary cross-entropy.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, x):
        return torch.sigmoid(self.fc(x))


torch.manual_seed(0)
clf = Classifier()
x = torch.randn(8, 3)
y = torch.randint(0, 2, (8,)).float()
loss = F.binary_cross_entropy(clf(x), y)  # <- culprit
loss.backward()
