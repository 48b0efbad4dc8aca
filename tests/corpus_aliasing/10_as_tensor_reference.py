# From: torch.as_tensor docs (shares memory with an ndarray of the same dtype; our own program)
import numpy as np
import torch

signal = np.linspace(0, 1, 8, dtype=np.float32)
clean = torch.as_tensor(signal)
ref = clean.clone()
noisy = torch.from_numpy(signal)
noisy.add_(0.5)  # <- culprit
print("error", (noisy - clean).abs().max().item())
print("TRUTH changed=%s" % (not torch.equal(clean, ref)))
