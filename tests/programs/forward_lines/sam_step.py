"""A sharpness-aware (two-pass, SAM) step done wrong: the first pass's graph is kept, the weights are
perturbed in place, and the second backward runs through the first pass's graph, whose saved weights
no longer hold the values they had."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)


def first_step(rho=0.05):
    with torch.no_grad():
        for p in model.parameters():
            p.add_(rho * p.grad / (p.grad.norm() + 1e-12))


for step in range(3):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward(retain_graph=True)
    first_step()
    opt.zero_grad()
    loss.backward()
    opt.step()
