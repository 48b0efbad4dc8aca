# source: https://github.com/facebookresearch/kill-the-bits/issues/35 (a forward hook storing each layer's input in a list per layer)
# expect-kind: hook-holds-tensors
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +98,304 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
layers = torch.nn.ModuleList([torch.nn.Linear(128, 128) for _ in range(3)])
opt = torch.optim.SGD(layers.parameters(), lr=0.01)


class Watcher:
    def __init__(self, modules):
        self.activations = {i: [] for i in range(len(modules))}
        for i, m in enumerate(modules):
            m.register_forward_hook(self.hook(i))

    def hook(self, layer):
        def fwd_hook(module, inputs, output):
            self.activations[layer].append(inputs[0].data.cpu())  # CULPRIT FIX: self.activations[layer][:] = [inputs[0].data.cpu()]
        return fwd_hook


Watcher(layers)
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    h = torch.randn(64, 128)
    for layer in layers:
        h = torch.relu(layer(h))
    opt.zero_grad()
    h.pow(2).mean().backward()
    opt.step()
print("done")
