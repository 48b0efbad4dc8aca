# A miss of explore13 (benchmarks/RESULTS.md "Unseen programs"), found since leak14 by the mechanism its
# NOTE names; tests/test_unseen14.py runs it with its twin.
# source: https://github.com/fffasttime/MRFI/pull/5 (a fault-injection wrapper registered forward hooks on every instantiation and dropped their handles: memory grows over a campaign)
# expect-kind: hook-holds-tensors
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +1,024 B/step peak tensor memory; twin +0 B/step (the program has no backward call, so tensorscope takes no growth sample)
import os

import torch


class FaultInjector:
    def __init__(self, model, rate):
        self.mask = (torch.rand(1, 256) < rate).float()
        self.handles = []
        for m in model.modules():
            if isinstance(m, torch.nn.Linear) and m.out_features == 256:
                self.handles.append(m.register_forward_hook(lambda mod, inp, out, mask=self.mask: out * (1 - mask)))  # CULPRIT

    def close(self):
        for h in self.handles:
            h.remove()


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
x = torch.randn(8, 64)
flips = 0
for trial in range(int(os.environ.get("LEAK_STEPS", "12"))):
    fi = FaultInjector(model, 0.01)
    with torch.no_grad():
        flips += int((model(x).argmax(1) != 0).sum())
    fi.handles = []  # FIX: fi.close()
print(flips)
