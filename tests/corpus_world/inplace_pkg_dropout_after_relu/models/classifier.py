import torch.nn as nn
import torch.nn.functional as F


class SimpleClassifier(nn.Module):
    def __init__(self, in_dim, hid_dim, out_dim, dropout):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hid_dim)
        self.drop = nn.Dropout(dropout, inplace=True)
        self.fc2 = nn.Linear(hid_dim, out_dim)

    def forward(self, x):
        h = F.relu(self.fc1(x))  # <- saved
        h = self.drop(h)  # <- culprit
        return self.fc2(h)
