import numpy as np
import torch


class RingLoader:
    def __init__(self, batch, features):
        self.rng = np.random.default_rng(0)
        self.buf = self.rng.standard_normal((batch, features)).astype(np.float32)

    def next_batch(self):
        return torch.from_numpy(self.buf)

    def prefetch(self):
        self.buf[:] = self.rng.standard_normal(self.buf.shape)  # <- culprit
