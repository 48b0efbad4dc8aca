# expect-kind: none
# A standard training loop: zero_grad, forward, backward, step.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(32, 3)
y = x.sum(dim=1, keepdim=True)
for epoch in range(20):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
