# expect-kind: no-grad-fn
# `.data` used to "get the tensor" cuts the output off the graph.
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return self.fc2(h).data  # <- culprit


torch.manual_seed(0)
net = Net()
logits = net(torch.randn(3, 4))
loss = nn.functional.cross_entropy(logits, torch.tensor([0, 1, 1]))
loss.backward()  # <- backward
