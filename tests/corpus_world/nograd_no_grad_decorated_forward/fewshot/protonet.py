import torch
import torch.nn as nn


class PrototypicalNet(nn.Module):
    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone
        self.prototypes = None

    def process_support_set(self, images, labels):
        feats = self.backbone(images)
        n_way = int(labels.max()) + 1
        self.prototypes = torch.stack([feats[labels == k].mean(0) for k in range(n_way)])

    @torch.no_grad()  # <- culprit
    def forward(self, query):
        z = self.backbone(query)
        return -torch.cdist(z, self.prototypes)
