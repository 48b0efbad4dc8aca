# Twin of 38: the target network gets a deep copy of the backbone
import copy

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU())
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.backbone(x))


torch.manual_seed(0)
online = Net()
target = torch.nn.Sequential(copy.deepcopy(online.backbone), torch.nn.Linear(16, 4))  # a fixed target network
probe = torch.randn(4, 6)
with torch.no_grad():
    target_at_start = target(probe).clone()  # what a fixed target answers: recorded once
opt = torch.optim.SGD(online.parameters(), lr=0.1)
x, y = torch.randn(32, 6), torch.randn(32, 4)
for step in range(3):
    with torch.no_grad():
        goal = y + 0.5 * target(x)
    loss = torch.nn.functional.mse_loss(online(x), goal)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    print("TRUTH changed=%s" % (not torch.allclose(target(probe), target_at_start)))
