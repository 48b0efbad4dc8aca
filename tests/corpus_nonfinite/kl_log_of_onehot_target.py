# Rewritten from a common forum report: a hand-written KL divergence takes log of a one-hot target (zeros), outside autograd.
# expect: kind=silent-non-finite-value line=10 op=log phase=forward sink=loss sink_line=12 sink_step=0
import torch
import torch.nn.functional as F
torch.manual_seed(0)
student = torch.nn.Linear(4, 3)
opt = torch.optim.SGD(student.parameters(), lr=0.1)
for step in range(3):
    x, target = torch.randn(5, 4), F.one_hot(torch.randint(0, 3, (5,)), 3).float()
    loss = (target * (torch.log(target) - F.log_softmax(student(x), dim=1))).sum(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
