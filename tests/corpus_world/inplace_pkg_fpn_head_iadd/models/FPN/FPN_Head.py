import torch.nn as nn
import torch.nn.functional as F


class FPNHead(nn.Module):
    def __init__(self, channels, levels):
        super().__init__()
        self.lateral = nn.ModuleList([nn.Conv2d(channels, channels, 1) for _ in range(levels)])

    def forward(self, feats):
        laterals = [F.relu(conv(f)) for conv, f in zip(self.lateral, feats)]  # <- saved
        for i in range(len(laterals) - 1, 0, -1):
            prev_shape = laterals[i - 1].shape[2:]
            laterals[i - 1] += F.interpolate(laterals[i], size=prev_shape, mode="nearest")  # <- culprit
        return laterals[0]
