# From: dvgodoy/PyTorchStepByStep#28 and baal-org/baal#110 (`model_state = model.state_dict()` kept to restart a
# second run from the same initial weights; the first run's training changes it, so the second run starts from
# the trained weights; our own program)
import copy  # noqa: F401 (the twin deep-copies)

import torch
import torch.nn.functional as F

torch.manual_seed(42)
model = torch.nn.Sequential(torch.nn.Linear(1, 1))
x = torch.randn(64, 1)
y = 2 * x + 1 + 0.1 * torch.randn(64, 1)
model_state = model.state_dict()
ref = {k: v.clone() for k, v in model_state.items()}


def train(optimizer, epochs):
    for _ in range(epochs):
        optimizer.zero_grad()
        F.mse_loss(model(x), y).backward()
        optimizer.step()  # <- culprit


train(torch.optim.SGD(model.parameters(), lr=0.1), 10)
changed = any(not torch.equal(model_state[k], ref[k]) for k in ref)
model.load_state_dict(model_state)  # the second optimizer should start from the initial weights
train(torch.optim.Adam(model.parameters(), lr=0.1), 10)
print("TRUTH changed=%s" % changed)
