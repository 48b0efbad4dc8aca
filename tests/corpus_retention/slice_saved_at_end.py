# source: https://github.com/pytorch/pytorch/issues/53419 (torch.save of a slice writes the whole storage)
# expect-kind: view-pins-storage
import os
import tempfile

import torch

data = torch.ones((20000, 30), dtype=torch.int64)
data_small = data[:300, :]  # CULPRIT FIX: data_small = data[:300, :].clone()
del data
path = os.path.join(tempfile.mkdtemp(), "small.pt")
torch.save(data_small, path)
print(os.path.getsize(path) > 0)
