import torch.nn as nn
import torch.nn.functional as F


class MultiBoxLoss(nn.Module):
    def __init__(self, num_classes, use_gpu=True):
        super().__init__()
        self.num_classes = num_classes
        self.use_gpu = use_gpu

    def forward(self, conf_data, targets):
        conf_t = targets.clone()
        if self.use_gpu:
            conf_t = conf_t.cuda()  # <- culprit
        return F.cross_entropy(conf_data.reshape(-1, self.num_classes), conf_t.reshape(-1))
