# Rewritten from jocpae/clDice#5 and ivadomed/ivadomed#183: a soft Dice loss written without a smooth term, over a
# patch with no foreground in the target and none predicted, is 0/0.
# expect: kind=silent-non-finite-value line=17 op=div phase=forward sink=loss sink_line=20 sink_step=0
import torch

torch.manual_seed(0)
head = torch.nn.Conv2d(1, 1, 3, padding=1)
with torch.no_grad():
    head.bias.fill_(-120.0)
opt = torch.optim.SGD(head.parameters(), lr=0.1)
image = torch.rand(2, 1, 6, 6)
target = torch.zeros(2, 1, 6, 6)
target[0, 0, 2:4, 2:4] = 1.0
prob = torch.sigmoid(head(image))
inter = (prob * target).sum(dim=(1, 2, 3))
total = prob.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3))
dice = 1 - 2 * inter / total
loss = dice.mean()
opt.zero_grad()
loss.backward()
opt.step()
print("loss", loss.item())
