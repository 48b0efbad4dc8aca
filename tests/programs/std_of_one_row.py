"""A normalisation of one's own over a batch of one row (review19, from pytorch/examples mnist_rnn with its
BatchNorm1d written by hand and a last batch of one): ``std`` of one sample is nan, and torch warns "degrees of
freedom is <= 0" once, at the forward line. ``explain`` redoes ``std`` from its saved input to name it the first
non-finite op: that redo must not warn the program a second time."""
import torch

torch.manual_seed(0)
lin = torch.nn.Linear(4, 3)
x = torch.randn(1, 4)
h = lin(x)
h = (h - h.mean(0)) / h.std(0)
h.sum().backward()
print("grad finite:", bool(lin.weight.grad.isfinite().all()))
