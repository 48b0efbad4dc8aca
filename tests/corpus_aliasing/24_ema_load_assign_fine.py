# Twin of 24: load_state_dict without assign copies, so the teacher owns its tensors
import torch

torch.manual_seed(0)
student = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
teacher = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
teacher.load_state_dict(student.state_dict())  # copies into the teacher's own tensors
opt = torch.optim.Adam(student.parameters(), lr=0.05)
ref = {k: v.detach().clone() for k, v in student.named_parameters()}  # an independent teacher
x, y = torch.randn(32, 3), torch.randn(32, 1)


def update_teacher(decay=0.99):
    with torch.no_grad():
        for t, s in zip(teacher.parameters(), student.parameters()):
            t.mul_(decay).add_(s, alpha=1 - decay)


for step in range(4):
    loss = torch.nn.functional.mse_loss(student(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for k, s in student.named_parameters():
            ref[k].mul_(0.99).add_(s, alpha=0.01)
    update_teacher()
print("TRUTH changed=%s" % any(not torch.allclose(v, ref[k]) for k, v in teacher.named_parameters()))
