# source: https://github.com/Lavender105/DFF/issues/13
# expect-kind: no-grad-fn
# The training loop reuses the inference helper, which puts the model in eval
# mode and runs it under torch.no_grad().
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 2, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()


@torch.no_grad()  # <- culprit
def predict(net, images):
    net.eval()
    return net(images)


for it in range(2):
    images = torch.randn(2, 3, 8, 8)
    target = torch.randint(0, 2, (2, 8, 8))
    outputs = predict(model, images)
    loss = criterion(outputs, target)
    opt.zero_grad()
    loss.backward()  # <- backward
    opt.step()
