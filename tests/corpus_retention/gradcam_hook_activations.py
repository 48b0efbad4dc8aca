# source: https://github.com/jacobgil/pytorch-grad-cam/issues/71 (a forward hook accumulating activations on the device)
# expect-kind: hook-holds-tensors
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +131,072 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                            torch.nn.Flatten(), torch.nn.Linear(16, 10))


def activations_recorder():
    activations = []

    def save_activation(module, inputs, output):
        activations.append(output)  # CULPRIT FIX: activations[:] = [output.detach()]

    return save_activation


model[1].register_forward_hook(activations_recorder())
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    image = torch.randn(2, 3, 32, 32)
    score = model(image)[:, 3].sum()
    model.zero_grad()
    score.backward()
print("cams done")
