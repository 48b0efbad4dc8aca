# Rewritten from karpathy/makemore#22 and pytorch/pytorch#1381: a hand-written BatchNorm fed a last batch of one.
# expect: clean
import torch

torch.manual_seed(0)
data = torch.randn(7, 4)
w = torch.randn(4, 3, requires_grad=True)
gamma = torch.ones(3, requires_grad=True)
running_var = torch.ones(3)
opt = torch.optim.SGD([w, gamma], lr=0.05)
for start in range(0, 7, 3):  # batches of 3, 3 and 1
    x = data[start:start + 3] @ w
    xvar = x.var(0, keepdim=True, correction=0)
    xhat = (x - x.mean(0, keepdim=True)) / torch.sqrt(xvar + 1e-5)
    loss = (gamma * xhat).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        running_var = 0.9 * running_var + 0.1 * xvar
    print(start, loss.item())
print("running_var", running_var)
