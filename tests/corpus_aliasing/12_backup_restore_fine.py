# Twin of 12: the backup deep-copied
import copy

import torch

torch.manual_seed(0)
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=5.0)
x, y = torch.randn(16, 2), torch.randn(16, 1)
loss0 = torch.nn.functional.mse_loss(model(x), y)
backup = copy.deepcopy(model.state_dict())
ref = {k: v.clone() for k, v in backup.items()}
loss0.backward()
opt.step()
loss1 = torch.nn.functional.mse_loss(model(x), y)
if loss1 > loss0:
    model.load_state_dict(backup)
print("TRUTH changed=%s" % any(not torch.equal(backup[k], ref[k]) for k in backup))
