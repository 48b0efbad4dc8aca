# source: https://github.com/davda54/sam/issues/45 (SAM's second step computed the loss from the first pass's output instead of a new forward: backward a second time)
# expect-kind: backward-twice
# measured (torch 2.13.0+cpu, python alone): the leak raises RuntimeError 'Trying to backward through the graph a second time' at the second backward of step 0; with retain_graph=True at the first backward it raises the in-place version error instead (the parameters changed); the twin runs all 3 steps
import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
rho = 0.05
for step in range(3):
    images, target = torch.randn(8, 10), torch.randint(0, 3, (8,))
    output = model(images)
    loss = F.cross_entropy(output, target)
    loss.backward()
    with torch.no_grad():  # first step: climb to w + e(w)
        norm = torch.norm(torch.stack([p.grad.norm() for p in model.parameters()]))
        eps = [rho * p.grad / (norm + 1e-12) for p in model.parameters()]
        for p, e in zip(model.parameters(), eps):
            p.add_(e)
    opt.zero_grad()
    F.cross_entropy(output, target).backward()  # CULPRIT FIX: F.cross_entropy(model(images), target).backward()
    with torch.no_grad():  # second step: back to w, then the update
        for p, e in zip(model.parameters(), eps):
            p.sub_(e)
    opt.step()
    opt.zero_grad()
print("done")
