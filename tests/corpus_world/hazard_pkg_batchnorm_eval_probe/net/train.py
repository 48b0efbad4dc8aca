def warmup(model, batch):
    model.train()
    model(batch)  # <- culprit
