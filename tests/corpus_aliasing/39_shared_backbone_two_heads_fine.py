# Fine on its own (no bug twin): multi-task learning reuses one backbone module in two models on purpose (`aux = nn.Sequential(model.backbone, aux_head)`), and both heads train with it
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU()), torch.nn.Linear(16, 3))
aux = torch.nn.Sequential(model[0], torch.nn.Linear(16, 1))  # a second task on the same features
opt = torch.optim.SGD(torch.nn.ModuleList([model, aux]).parameters(), lr=0.1)
x, y, r = torch.randn(32, 6), torch.randint(0, 3, (32,)), torch.randn(32, 1)
for step in range(3):
    loss = torch.nn.functional.cross_entropy(model(x), y) + torch.nn.functional.mse_loss(aux(x), r)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("TRUTH changed=%s" % (aux[0] is not model[0]))
