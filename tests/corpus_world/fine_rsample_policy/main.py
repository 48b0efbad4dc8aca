# source: https://github.com/jankrepl/deepdow/pull/106
# expect-kind: none
# The fixed allocator draws its weights with rsample(), so the Sharpe-style
# loss reaches the network's parameters.
import torch

from agent.policy import GaussianAllocator

torch.manual_seed(0)
alloc = GaussianAllocator(n_assets=4)
opt = torch.optim.Adam(alloc.parameters(), lr=0.01)
returns = torch.randn(16, 4) * 0.02
for step in range(3):
    weights = alloc(torch.randn(16, 5))
    portfolio = (weights * returns).sum(dim=1)
    loss = -portfolio.mean() / (portfolio.std() + 1e-6)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("grad", alloc.log_sigma.grad.abs().sum().item() > 0)
