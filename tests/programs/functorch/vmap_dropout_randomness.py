# source: https://github.com/pytorch/rl/issues/2313
# expect-kind: functorch-transform
# Per-example gradients with vmap over a model with dropout in training mode: vmap's default
# randomness='error' refuses any random op.
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.1), torch.nn.Linear(8, 1))
params = {k: v.detach() for k, v in model.named_parameters()}


def sample_loss(p, x, y):
    out = functional_call(model, p, (x.unsqueeze(0),))  # <- culprit
    return F.mse_loss(out.squeeze(0), y)


xs, ys = torch.randn(6, 4), torch.randn(6, 1)
per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))(params, xs, ys)
print({k: v.shape for k, v in per_sample.items()})
