import torch


def sgd_update(model, lr):
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-lr)
