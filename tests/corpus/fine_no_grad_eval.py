# expect-kind: none
# Evaluation under torch.no_grad() between training steps.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(12, 4)
labels = torch.randint(0, 3, (12,))
for epoch in range(3):
    model.train()
    loss = nn.functional.cross_entropy(model(x), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(dim=1) == labels).float().mean()
    print(epoch, acc.item())
