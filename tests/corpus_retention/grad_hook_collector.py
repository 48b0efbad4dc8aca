# source: https://github.com/utkuozbulak/pytorch-cnn-visualizations/issues/53 (hooks registered for visualisation keep what they capture: memory runs out)
# expect-kind: hook-holds-tensors
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
