# source: https://github.com/bnu-wangxun/Deep_Metric/issues/26
# expect-kind: float-has-no-backward
# The loss in the package returns (loss, prec, pos_d, neg_d) but the trainer
# unpacks the values in another order, so `loss` is the float precision.
import torch
import torch.nn as nn

from metric.losses import WeightLoss

torch.manual_seed(0)
model = nn.Linear(16, 8)
criterion = WeightLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
inputs = torch.randn(8, 16)
labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
embed = model(inputs)
inter_, loss, dist_ap, dist_an = criterion(embed, labels)  # <- culprit-alt
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
