# Twin of 35: load_state_dict without assign copies into the anchor's own tensors
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 10), torch.nn.ReLU(), torch.nn.Linear(10, 1))
anchor = torch.nn.Sequential(torch.nn.Linear(3, 10), torch.nn.ReLU(), torch.nn.Linear(10, 1))
anchor.load_state_dict(model.state_dict())  # the pretrained weights to stay near
anchor.requires_grad_(False)
start = [p.detach().clone() for p in model.parameters()]  # an independent anchor
opt = torch.optim.SGD(model.parameters(), lr=0.2)
x, y = torch.randn(32, 3), torch.randn(32, 1)
for step in range(3):
    penalty = sum(((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchor.parameters()))
    loss = torch.nn.functional.mse_loss(model(x), y) + 0.01 * penalty
    opt.zero_grad()
    loss.backward()
    opt.step()
print("TRUTH changed=%s" % any(not torch.equal(a, s) for a, s in zip(anchor.parameters(), start)))
