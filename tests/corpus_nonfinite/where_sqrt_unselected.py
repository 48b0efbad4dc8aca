# Rewritten from pytorch/pytorch#187297 and #23395: torch.where selects the safe branch, yet backward through the other branch's sqrt is NaN.
# expect: kind=silent-non-finite-value line=7 op=SqrtBackward0 phase=backward sink=grad sink_line=9 sink_step=0
import torch

x = torch.tensor([-1.0, 0.0, 4.0], requires_grad=True)
opt = torch.optim.SGD([x], lr=0.1)
y = torch.where(x > 0, torch.sqrt(x), x)
loss = y.sum()
loss.backward()
opt.step()
print("x", x)
