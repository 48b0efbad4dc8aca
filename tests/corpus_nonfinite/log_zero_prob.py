# Rewritten from yhenon/pytorch-retinanet#3: a focal-style loss takes log of a probability that is exactly 0.
# expect: kind=silent-non-finite-value line=11 op=log phase=forward sink=loss sink_line=13 sink_step=0
import torch

torch.manual_seed(0)
logits = torch.tensor([[4.0, -200.0], [1.0, 2.0]], requires_grad=True)
target = torch.tensor([[1.0, 1.0], [0.0, 1.0]])
opt = torch.optim.SGD([logits], lr=0.1)
for step in range(2):
    p = torch.sigmoid(logits)
    loss = -(target * torch.log(p)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
