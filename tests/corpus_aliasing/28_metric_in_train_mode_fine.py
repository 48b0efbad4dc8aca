# Twin of 28: the metric's forward runs in eval mode
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
    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean()
        ref(x)
    model.train()
print("TRUTH changed=%s" % (not torch.allclose(model[0].running_mean, ref.running_mean)))
