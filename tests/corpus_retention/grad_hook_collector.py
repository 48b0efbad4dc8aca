# source: https://github.com/utkuozbulak/pytorch-cnn-visualizations/issues/53 (hooks registered for visualisation keep what they capture: memory runs out)
# expect-kind: hook-holds-tensors
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +262,144 B/step peak tensor memory, +0 graph nodes/step held by globals; twin +0 B/step, +0 nodes/step
import os

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def make_recorder():
    seen = []

    def record(grad):
        seen.append(grad)  # CULPRIT FIX: seen[:] = [grad]

    return record


model[0].weight.register_hook(make_recorder())
for step in range(int(os.environ.get("LEAK_STEPS", "12"))):
    x = torch.randn(8, 256)
    loss = model(x).logsumexp(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
