# source: https://github.com/MC-E/Deep-Generalized-Unfolding-Networks-for-Image-Restoration/issues/6
# expect-kind: no-grad-fn
# The multi-stage losses are gathered with torch.tensor([...]), which copies the
# values into a new leaf tensor with no graph behind it.
import torch
import torch.nn as nn

torch.manual_seed(0)


class Stage(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x):
        return x + self.conv(x)


stages = nn.ModuleList([Stage() for _ in range(3)])
opt = torch.optim.Adam(stages.parameters(), lr=1e-3)
blurred = torch.randn(2, 3, 8, 8)
target = torch.randn(2, 3, 8, 8)
restored = []
x = blurred
for s in stages:
    x = s(x)
    restored.append(x)
criterion = nn.L1Loss()
losses = [criterion(r, target) for r in restored]
losses = torch.tensor(losses)  # <- culprit
loss_char = sum(losses)
opt.zero_grad()
loss_char.backward()  # <- backward
opt.step()
