# expect-kind: inplace-modified-saved-tensor
# expect-node: TanhBackward0
# nn.Tanh followed by nn.ReLU(inplace=True) inside nn.Sequential: both run
# inside the library; the user's line is the call of the model.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(
    nn.Linear(4, 8),
    nn.Tanh(),
    nn.ReLU(inplace=True),
    nn.Linear(8, 1),
)
x = torch.randn(16, 4)
y = torch.randn(16, 1)
pred = model(x)  # <- saved <- culprit
loss = nn.functional.mse_loss(pred, y)
loss.backward()  # <- backward
