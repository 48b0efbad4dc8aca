import torch


class EMA:
    def __init__(self, model, decay=0.99):
        self.decay = decay
        self.shadow = {n: torch.zeros_like(p) for n, p in model.named_parameters()}

    def copy_to(self, model):
        for n, p in model.named_parameters():
            p.data.copy_(self.shadow[n])  # <- culprit
