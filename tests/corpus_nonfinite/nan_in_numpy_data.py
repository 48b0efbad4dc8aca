# Rewritten from danielegrattarola/keras-gat#14 and zhouhaoyi/Informer2020#402: a feature matrix loaded with a missing value.
# expect: kind=silent-non-finite-value line=7 op=data phase=forward sink=loss sink_line=12 sink_step=0
import numpy as np
import torch

raw = np.array([[1.0, 2.0], [np.nan, 0.5], [3.0, 1.0]], dtype=np.float32)
feats = torch.from_numpy(raw)
w = torch.ones(2, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
pred = feats @ w
loss = pred.pow(2).mean()
loss.backward()
opt.step()
print("loss", loss.item())
