import torch


class APMeter:
    def __init__(self):
        self.scores = torch.FloatTensor()
        self.targets = torch.LongTensor()

    def add(self, output, target):
        if self.scores.numel() == 0:
            self.scores = output  # <- culprit
            self.targets = target
            return
        offset = self.scores.size(0)
        self.scores.resize_(offset + output.size(0), output.size(1))
        self.targets.resize_(offset + target.size(0), target.size(1))
        self.scores.narrow(0, offset, output.size(0)).copy_(output)
        self.targets.narrow(0, offset, target.size(0)).copy_(target)
