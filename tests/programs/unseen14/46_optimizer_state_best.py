# A miss of explore13 (benchmarks/RESULTS.md "Unseen programs"), found since leak14 by the mechanism its
# NOTE names; tests/test_unseen14.py runs it with its twin.
# From: pytorch/pytorch#196083 and pytorch/pytorch#34765 (optimizer.state_dict() hands out the live moment
# tensors: the "best" optimizer state kept beside a deep copy of the model's weights follows training, so the
# restored run resumes with the last moments; our own program)
# expect-kind: kept-value-changed
import copy

import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
x, y = torch.randn(32, 5), torch.randn(32, 1)
best_loss = float("inf")
for epoch in range(6):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()  # CULPRIT
    if epoch == 1:  # pretend epoch 1 was the best on validation
        best_loss = loss.item()
        best_model = copy.deepcopy(model.state_dict())
        best_optim = optimizer.state_dict()  # FIX: best_optim = copy.deepcopy(optimizer.state_dict())
        ref = copy.deepcopy(best_optim)
model.load_state_dict(best_model)
optimizer.load_state_dict(best_optim)
changed = any(not torch.equal(best_optim["state"][i]["exp_avg"], ref["state"][i]["exp_avg"]) for i in ref["state"])
print("TRUTH changed=%s" % changed)
