# source: https://github.com/lm-sys/FastChat/issues/580
# expect-kind: device-mismatch
# The model is created on the meta device (deferred initialisation, to be
# materialised later) but is called on CPU inputs before that happens.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 2))
model = model.to("meta")  # <- culprit
x = torch.randn(3, 4)
out = model(x)
out.sum().backward()
