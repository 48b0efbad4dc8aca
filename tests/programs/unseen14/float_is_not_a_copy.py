# From: huggingface/transformers#33201 (from_numpy shares memory with the array, torch.tensor copies) and the
# preprocessing helpers that rely on `.float()` to copy: on a float32 array `.float()` returns the tensor
# itself, so the in-place scaling that follows writes into the caller's array. Our own program.
# truth (torch 2.13.0+cpu): the program prints TRUTH changed=True, its twin (FIX applied) TRUTH changed=False
# expect-kind: kept-value-changed
import numpy as np
import torch


def preprocess(batch):
    x = torch.from_numpy(batch).float()
    x.sub_(0.5).mul_(2.0)  # CULPRIT FIX: x = (x - 0.5) * 2.0
    return x


torch.manual_seed(0)
net = torch.nn.Linear(6, 2)
data = np.random.default_rng(1).uniform(size=(10, 6)).astype(np.float32)
ref = data.copy()
with torch.no_grad():
    out = net(preprocess(data))
print("out", tuple(out.shape))
print("TRUTH changed=%s" % (not np.array_equal(data, ref)))
