import torch


def step_before_backward(model, x):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    hidden = model.proj(x).tanh()
    loss = model.proj(hidden).pow(2).sum()  # saves proj.weight to compute the gradient of hidden
    optimizer.step()  # writes the weights in place, but the loss still needs them
    loss.backward()
