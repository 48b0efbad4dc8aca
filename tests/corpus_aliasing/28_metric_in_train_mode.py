# From: m2lines/Samudra#572: an extra forward pass per batch in training mode skews BatchNorm running stats (our own program)
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 3))
ref = torch.nn.BatchNorm1d(5)  # the statistics of one update per batch
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 5) * 3 + 1, torch.randint(0, 3, (8,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean()  # <- culprit
        ref(x)
print("TRUTH changed=%s" % (not torch.allclose(model[0].running_mean, ref.running_mean)))
