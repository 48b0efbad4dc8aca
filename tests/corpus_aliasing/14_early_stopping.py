# From: zhangj111/astnn#8, early-stopping helpers keeping self.best = model.state_dict() (our own program)
import torch


class EarlyStopping:
    def __init__(self):
        self.best_loss = float("inf")
        self.best = None

    def update(self, loss, model):
        if loss < self.best_loss:
            self.best_loss = loss
            self.best = model.state_dict()
            self.ref = {k: v.clone() for k, v in self.best.items()}


torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
opt = torch.optim.Adam(model.parameters(), lr=0.5)
stopper = EarlyStopping()
x, y = torch.randn(10, 3), torch.randn(10, 1)
for _ in range(3):
    loss = torch.nn.functional.mse_loss(model(x), y)
    stopper.update(loss.item(), model)
    opt.zero_grad()
    loss.backward()
    opt.step()  # <- culprit
model.load_state_dict(stopper.best)
print("TRUTH changed=%s" % any(not torch.equal(stopper.best[k], stopper.ref[k]) for k in stopper.best))
