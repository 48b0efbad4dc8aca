import torch.nn as nn


class LaneNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.cls = nn.Linear(8, 5)

    def forward(self, x):
        return self.cls(self.model(x).flatten(1))
