# source: https://github.com/kevinzakka/pytorch-goodies/issues/11
# expect-kind: no-grad-fn
# The dice loss thresholds the probabilities and casts them to an integer
# mask before computing the overlap: integer tensors never carry a graph.
import torch
import torch.nn as nn

torch.manual_seed(0)
seg = nn.Conv2d(1, 2, 3, padding=1)
opt = torch.optim.SGD(seg.parameters(), lr=0.1)
img = torch.randn(2, 1, 8, 8)
true = torch.randint(0, 2, (2, 8, 8))


def dice_loss(logits, target, eps=1e-7):
    probas = logits.softmax(dim=1)[:, 1]
    pred = probas
    pred = (pred > 0.5).long()  # <- culprit
    inter = (pred * target).sum()
    card = (pred + target).sum()
    return 1 - (2.0 * inter / (card + eps))


loss = dice_loss(seg(img), true)
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
