def sgd_update(model, lr):
    for p in model.parameters():
        p.add_(p.grad, alpha=-lr)  # <- culprit
