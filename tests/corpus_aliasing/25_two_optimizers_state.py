# From: pytorch/pytorch#147288 and pytorch/pytorch#196083: a second optimizer given the first one's state_dict in the same process (our own program)
import copy

import torch

torch.manual_seed(0)
model_a = torch.nn.Linear(5, 1)
model_b = copy.deepcopy(model_a)
opt_a = torch.optim.Adam(model_a.parameters(), lr=0.01)
opt_b = torch.optim.Adam(model_b.parameters(), lr=0.01)
x, y = torch.randn(20, 5), torch.randn(20, 1)
for m, o in ((model_a, opt_a),):
    torch.nn.functional.mse_loss(m(x), y).backward()
    o.step()
opt_b.load_state_dict(opt_a.state_dict())  # resume b from a's moments
# an independent optimizer resumed from a copy of the same state
model_c = copy.deepcopy(model_b)
opt_c = torch.optim.Adam(model_c.parameters(), lr=0.01)
opt_c.load_state_dict(copy.deepcopy(opt_a.state_dict()))
for step in range(3):
    for m, o in ((model_a, opt_a), (model_b, opt_b), (model_c, opt_c)):
        o.zero_grad()
        torch.nn.functional.mse_loss(m(x), y).backward()
    opt_a.step()  # <- culprit
    opt_b.step()
    opt_c.step()
changed = any(not torch.allclose(opt_b.state[pb]["exp_avg"], opt_c.state[pc]["exp_avg"])
              for pb, pc in zip(model_b.parameters(), model_c.parameters()))
print("TRUTH changed=%s" % changed)
