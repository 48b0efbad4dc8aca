# From: the time-series LSTM example of pytorch/examples, with a best-model snapshot added the way users
# do: `best = model.state_dict()` before the loop as a placeholder, rebound in the first
# epoch (best_loss starts at inf); without a copy: the later epochs change it (our
# own program)
import copy  # noqa: F401 (the twin copies)

import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data, target = torch.randn(16, 3), torch.randn(16, 1)
best = model.state_dict()
best_loss, min_delta = float("inf"), 1.0
for epoch in range(3):
    optimizer.zero_grad()
    F.mse_loss(model(data), target).backward()
    optimizer.step()  # <- culprit
    with torch.no_grad():
        loss = F.mse_loss(model(data), target).item()
    if best_loss - loss > min_delta:  # improved by more than min_delta: the first epoch only
        best_loss = loss
        best = model.state_dict()
        ref = {k: v.clone() for k, v in best.items()}
model.load_state_dict(best)
print("TRUTH changed=%s" % any(not torch.equal(best[k], ref[k]) for k in ref))
