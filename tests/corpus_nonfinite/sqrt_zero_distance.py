# Rewritten from open-mmlab/mmrotate#205 and akanazawa/cmr#11: sqrt of a squared distance that is 0 for one pair.
# expect: kind=silent-non-finite-value line=9 op=SqrtBackward0 phase=backward sink=grad sink_line=11 sink_step=0
import torch

a = torch.tensor([[0.0, 0.0], [1.0, 1.0]], requires_grad=True)
b = torch.tensor([[0.0, 0.0], [2.0, 3.0]])
opt = torch.optim.SGD([a], lr=0.01)
sq = ((a - b) ** 2).sum(dim=1)
dist = torch.sqrt(sq)
loss = dist.mean()
loss.backward()
print("grad", a.grad)
opt.step()
print("a", a)
