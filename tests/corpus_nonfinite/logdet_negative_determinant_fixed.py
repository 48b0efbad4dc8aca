# Rewritten from pytorch/pytorch reports of logdet returning NaN (a Gaussian log-likelihood whose learned
# covariance factor has a negative determinant); the fix the thread gives is slogdet.
# expect: clean
import torch

factor = torch.tensor([[1.0, 2.0], [3.0, 1.0]], requires_grad=True)
opt = torch.optim.SGD([factor], lr=0.01)
x = torch.tensor([[0.5, -0.2], [0.1, 0.3]])
nll = 0.5 * (x @ factor).pow(2).sum() - torch.linalg.slogdet(factor)[1]
opt.zero_grad()
nll.backward()
opt.step()
print("nll", nll.item())
