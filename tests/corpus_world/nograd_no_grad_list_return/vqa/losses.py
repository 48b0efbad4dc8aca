import torch
import torch.nn.functional as F


@torch.no_grad()  # <- culprit
def module_losses(net, feats, answers):
    logits = net(feats)
    out = [F.cross_entropy(logits, answers)]
    out.append((logits.argmax(1) == answers).float().mean())
    return out
