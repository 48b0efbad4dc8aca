"""torch's UserWarnings raised inside wrapped in-place calls: once per line under the default filter,
as python's registry (module + line) does, in a loop too; and the other filter actions."""
import warnings

import torch

base = torch.zeros(1, 3)
mask = torch.tensor([[True, False, True]]).expand(2, 3)


def fill(x):
    x.masked_fill_(mask, 1.0)
    x.masked_fill_(mask, 2.0)
    x.index_put_((torch.tensor([0]),), torch.tensor(3.0))


for _ in range(3):
    fill(base.expand(2, 3))
x = base.expand(2, 3)
x.masked_fill_(mask, 4.0)
x.masked_fill_(mask, 4.0)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(2):
        fill(base.expand(2, 3))
print("always:", [(w.category.__name__, w.lineno) for w in caught])

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("once")
    for _ in range(2):
        fill(base.expand(2, 3))
    x.masked_fill_(mask, 5.0)
print("once:", [(w.category.__name__, w.lineno) for w in caught])

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("module")
    fill(base.expand(2, 3))
    x.masked_fill_(mask, 6.0)
print("module:", [(w.category.__name__, w.lineno) for w in caught])

with warnings.catch_warnings():
    warnings.filterwarnings("error", module="__main__")
    try:
        fill(base.expand(2, 3))
    except UserWarning as e:
        print("error:", type(e).__name__, str(e)[:30])

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Use of masked_fill_")
    fill(base.expand(2, 3))
print("registry lines:", sorted(k[2] for k in globals().get("__warningregistry__", {}) if k != "version"))
