# From: pytorch/pytorch#34765 (state_dict() hands out references, "the state keeps getting updated") and
# thunlp/OpenKE#131 (best state kept without deepcopy), here for the optimizer: a rollback on a loss spike
# restores SGD momentum buffers that kept training. Our own program.
# truth (torch 2.13.0+cpu): the program prints TRUTH changed=True, its twin (FIX applied) TRUTH changed=False
# expect-kind: kept-value-changed
import copy

import torch
import torch.nn.functional as F

torch.manual_seed(0)
model = torch.nn.Linear(6, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x, y = torch.randn(64, 6), torch.randn(64, 1)
ckpt, ref = None, None
for step in range(8):
    loss = F.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()  # CULPRIT
    if step == 2:
        ckpt = {"model": copy.deepcopy(model.state_dict()), "opt": opt.state_dict()}  # FIX: ckpt = {"model": copy.deepcopy(model.state_dict()), "opt": copy.deepcopy(opt.state_dict())}
        ref = copy.deepcopy(ckpt["opt"])
model.load_state_dict(ckpt["model"])
opt.load_state_dict(ckpt["opt"])
changed = any(not torch.equal(ckpt["opt"]["state"][k]["momentum_buffer"], ref["state"][k]["momentum_buffer"])
              for k in ref["state"])
print("TRUTH changed=%s" % changed)
