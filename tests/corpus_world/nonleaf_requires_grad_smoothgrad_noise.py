# source: https://github.com/microsoft/tensorwatch/issues/25
# expect-kind: non-leaf-requires-grad
# SmoothGrad: the input tensor already requires grad, so the noisy copy is a
# computed tensor and the explainer's `inp.requires_grad = True` fails on it.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5))
input_tensor = torch.rand(1, 3, 8, 8, requires_grad=True)


def backprop(inp, ind):
    inp.requires_grad = True  # <- culprit
    out = model(inp)
    grad, = torch.autograd.grad(out[0, ind], inp)
    return grad


total = torch.zeros_like(input_tensor)
for _ in range(4):
    noisy_inp = input_tensor + 0.1 * torch.randn_like(input_tensor)
    total += backprop(noisy_inp, 2)
print(total.abs().mean())
