import torch.nn as nn
import torch.nn.functional as F


class SimpleClassifier(nn.Module):
    def __init__(self, in_dim, hid_dim, out_dim, dropout):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hid_dim)
        self.drop = nn.Dropout(dropout, inplace=False)
        self.fc2 = nn.Linear(hid_dim, out_dim)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))
