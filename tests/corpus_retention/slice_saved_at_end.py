# source: https://github.com/pytorch/pytorch/issues/53419 (torch.save of a slice writes the whole storage)
# expect-kind: view-pins-storage
# measured (torch 2.13.0+cpu, python alone): torch.save of the slice writes 4,801,343 bytes, of its .clone() 73,343 bytes (the whole 4.8 MB storage stays alive through the slice)
import os
import tempfile

import torch

data = torch.ones((20000, 30), dtype=torch.int64)
data_small = data[:300, :]  # CULPRIT FIX: data_small = data[:300, :].clone()
del data
path = os.path.join(tempfile.mkdtemp(), "small.pt")
torch.save(data_small, path)
print(os.path.getsize(path) > 0)
