# From: mean-teacher / EMA reports where the teacher was built from the student's own tensors (our own program)
import torch

torch.manual_seed(0)
student = torch.nn.Linear(3, 3)
teacher_w = student.weight.detach()
ref = teacher_w.clone()
opt = torch.optim.SGD(student.parameters(), lr=0.5)
student(torch.randn(4, 3)).sum().backward()
opt.step()  # <- culprit
changed = not torch.equal(teacher_w, ref)  # the teacher before its own EMA update
with torch.no_grad():
    teacher_w.mul_(0.99).add_(student.weight, alpha=0.01)
print("teacher - student", (teacher_w - student.weight).abs().max().item())
print("TRUTH changed=%s" % changed)
