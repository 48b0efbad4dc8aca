import torch
import torch.nn.functional as F


def module_losses(net, feats, answers):
    out = []
    with torch.no_grad():  # <- culprit
        logits = net(feats)  # <- culprit-alt
        out.append(F.cross_entropy(logits, answers))
        out.append((logits.argmax(1) == answers).float().mean())
    return out
