# From: mean-teacher and distillation reports where the teacher's BatchNorm statistics were set from the student's (`teacher.bn.running_mean = student.bn.running_mean`) and then moved with the student (our own program)
import copy

import torch

torch.manual_seed(0)
student = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
teacher = copy.deepcopy(student).eval()
teacher.requires_grad_(False)
teacher[1].running_mean = student[1].running_mean  # give the teacher the student's statistics
teacher[1].running_var = student[1].running_var
mean_at_start = teacher[1].running_mean.clone()  # what a frozen teacher keeps: an independent copy
opt = torch.optim.SGD(student.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(16, 4) * 2 + 3
    with torch.no_grad():
        target = teacher(x)
    loss = torch.nn.functional.mse_loss(student(x), target)  # <- culprit
    opt.zero_grad()
    loss.backward()
    opt.step()
print("TRUTH changed=%s" % (not torch.equal(teacher[1].running_mean, mean_at_start)))
