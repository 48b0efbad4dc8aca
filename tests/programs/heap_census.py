"""What the program's heap holds, as gc sees it: no Python storage object appears unless the program
asks for one (torch keeps a storage's Python object alive as long as the storage itself), and the
tensors' referrers are the program's own."""
import gc

import torch

torch.manual_seed(0)


def storages():
    return sum(1 for o in gc.get_objects() if type(o) is torch.UntypedStorage)


model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
opt = torch.optim.Adam(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
for step in range(3):
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
buf = torch.zeros(6)
view = buf[2:]
view.add_(1.0)
buf.mul_(2.0)
print("storage objects before asking:", storages())
s = buf.untyped_storage()
print("storage objects after asking for one:", storages(), s.nbytes())
print("referrers of a parameter:", sorted(type(r).__name__ for r in gc.get_referrers(model[0].weight)))
print("loss", round(loss.item(), 6), "buf", buf.tolist())
