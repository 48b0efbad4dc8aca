# source: https://github.com/Harry24k/adversarial-attacks-pytorch/issues/2
# expect-kind: none
# The attack detaches the updated image before setting requires_grad again,
# which is the fix given in the report.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(12, 3))
image = torch.rand(1, 3, 2, 2)
label = 1
for _ in range(3):
    image = image.detach()
    image.requires_grad = True
    score = model(image)[0, label]
    grad, = torch.autograd.grad(score, image)
    image = image - 0.01 * grad.sign()
print(image.shape)
