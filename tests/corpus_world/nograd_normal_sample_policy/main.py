# source: https://github.com/jankrepl/deepdow/pull/106
# expect-kind: no-grad-fn
# The portfolio weights are drawn with Normal(...).sample(), which is not
# reparameterised: nothing on the way to the loss requires grad.
import torch

from agent.policy import GaussianAllocator

torch.manual_seed(0)
alloc = GaussianAllocator(n_assets=4)
opt = torch.optim.Adam(alloc.parameters(), lr=0.01)
returns = torch.randn(16, 4) * 0.02
weights = alloc(torch.randn(16, 5))
portfolio = (weights * returns).sum(dim=1)
loss = -portfolio.mean() / (portfolio.std() + 1e-6)
opt.zero_grad()
loss.backward()  # <- backward
opt.step()
