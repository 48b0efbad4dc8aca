# From: pytorch/vision#680 (ToTensor shares the data and the in-place Normalize changed the stored
# samples), with a NumPy store of video frames: __getitem__ wraps a frame with torch.from_numpy and
# scales it in place, so the data set's own frames are divided by 255 again at every epoch. Our own program.
# truth (torch 2.13.0+cpu): the program prints TRUTH changed=True, its twin (FIX applied) TRUTH changed=False
# expect-kind: kept-value-changed
import numpy as np
import torch


class Frames(torch.utils.data.Dataset):
    def __init__(self, frames):
        self.frames = frames

    def __len__(self):
        return len(self.frames)

    def __getitem__(self, i):
        img = torch.from_numpy(self.frames[i])
        img.div_(255.0)  # CULPRIT FIX: img = img / 255.0
        return img


frames = np.random.default_rng(0).uniform(0, 255, size=(8, 3, 4, 4)).astype(np.float32)
ref = frames.copy()
loader = torch.utils.data.DataLoader(Frames(frames), batch_size=4)
for epoch in range(2):
    for xb in loader:
        pass
print("TRUTH changed=%s" % (not np.array_equal(frames, ref)))
