# From: pytorch/tutorials#188, WenjieDu/PyPOTS#667 (best weights kept with state_dict(); our own program)
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randn(32, 1)
best_loss, best = float("inf"), None
for epoch in range(4):
    loss = torch.nn.functional.mse_loss(model(x), y)
    if loss.item() < best_loss:
        best_loss = loss.item()
        best = model.state_dict()
        ref = {k: v.clone() for k, v in best.items()}
    opt.zero_grad()
    loss.backward()
    opt.step()  # <- culprit
print("TRUTH changed=%s" % any(not torch.equal(best[k], ref[k]) for k in best))
