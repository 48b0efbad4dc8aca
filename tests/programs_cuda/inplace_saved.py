# Zeroing sigmoid's saved output through a detach() alias, on CUDA: backward raises.
import torch

a = torch.tensor([1.0, 2.0, 3.0], device="cuda", requires_grad=True)
out = a.sigmoid()
alias = out.detach()
alias.zero_()
out.sum().backward()
