# Rewritten from kornia/kornia#918 and clcarwin/focal_loss_pytorch#13: a focal loss with gamma < 1 whose confident
# predictions round sigmoid to exactly 1, so (1 - pt) ** 0.5 has an infinite gradient at 0.
# expect: clean
import torch

logits = torch.tensor([[4.0, 30.0], [-30.0, -2.0]], requires_grad=True)
target = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
opt = torch.optim.SGD([logits], lr=0.1)
gamma = 0.5
p = torch.sigmoid(logits)
pt = torch.where(target == 1, p, 1 - p)
loss = (-(1 - pt).clamp(min=1e-6) ** gamma * torch.log(pt)).mean()
loss.backward()
opt.step()
print("loss", loss.item(), "logits", logits)
