# Twin of 10: the noisy tensor made out of place
import numpy as np
import torch

signal = np.linspace(0, 1, 8, dtype=np.float32)
clean = torch.as_tensor(signal)
ref = clean.clone()
noisy = torch.from_numpy(signal) + 0.5
print("error", (noisy - clean).abs().max().item())
print("TRUTH changed=%s" % (not torch.equal(clean, ref)))
