# Twin of 32: the teacher's head gets a copy of the student's weight
import torch

torch.manual_seed(0)
student = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
teacher = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
teacher[2].weight = torch.nn.Parameter(student[2].weight.detach().clone())
head_at_start = teacher[2].weight.detach().clone()  # what a frozen head keeps: an independent copy
opt = torch.optim.SGD(student.parameters(), lr=0.5)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
for step in range(3):
    with torch.no_grad():
        target = teacher(x).softmax(1)
    out = student(x)
    loss = torch.nn.functional.cross_entropy(out, y) + torch.nn.functional.kl_div(
        out.log_softmax(1), target, reduction="batchmean")
    opt.zero_grad()
    loss.backward()
    opt.step()
print("TRUTH changed=%s" % (not torch.equal(teacher[2].weight, head_at_start)))
