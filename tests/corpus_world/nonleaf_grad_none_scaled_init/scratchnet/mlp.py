import torch


def init_params(n_in, n_hidden, n_out):
    w1 = torch.randn(n_in, n_hidden, requires_grad=True)
    w1 = w1 * 0.1  # <- culprit
    b1 = torch.zeros(n_hidden, requires_grad=True)
    w2 = torch.randn(n_hidden, n_out, requires_grad=True)
    return [w1, b1, w2]


def forward(params, x):
    w1, b1, w2 = params
    return torch.tanh(x @ w1 + b1) @ w2
