import torch
import torch.nn as nn


class WeightLoss(nn.Module):
    def forward(self, inputs, targets):
        x = nn.functional.normalize(inputs, dim=1)
        sim = x @ x.t()
        same = targets.unsqueeze(0) == targets.unsqueeze(1)
        eye = torch.eye(len(targets), dtype=torch.bool)
        pos = sim[same & ~eye]
        neg = sim[~same]
        loss = (1 - pos).mean() + neg.clamp(min=0).mean()
        prec = float((pos.mean() > neg.mean()).item())
        return loss, prec, pos.mean().item(), neg.mean().item()  # <- culprit
