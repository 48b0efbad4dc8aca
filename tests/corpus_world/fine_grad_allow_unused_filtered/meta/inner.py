import torch


def adapted_params(net, loss, lr):
    params = list(net.parameters())
    grads = torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)
    return [p if g is None else p - lr * g for p, g in zip(params, grads)]
