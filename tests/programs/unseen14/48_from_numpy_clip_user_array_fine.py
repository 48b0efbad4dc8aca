# A miss of explore13 (benchmarks/RESULTS.md "Unseen programs"), found since leak14 by the mechanism its
# NOTE names; tests/test_unseen14.py runs it with its twin.
# From: Trusted-AI/adversarial-robustness-toolbox#2262 (a detector's predict() wraps the caller's images with
# torch.from_numpy and clips and scales them in place: the caller's numpy array is changed; our own program)
import numpy as np
import torch


class Detector:
    def __init__(self):
        torch.manual_seed(0)
        self.net = torch.nn.Conv2d(3, 2, 3)

    def predict(self, images: np.ndarray):
        x = torch.from_numpy(images)
        x = x.clamp(0, 255).div(255)
        with torch.no_grad():
            return self.net(x).amax(dim=(2, 3)).numpy()


rng = np.random.default_rng(0)
batch = rng.uniform(-20, 280, size=(4, 3, 8, 8)).astype(np.float32)
ref = batch.copy()
scores = Detector().predict(batch)
print("scores", scores.shape, "max pixel after predict: %.2f" % batch.max())
print("TRUTH changed=%s" % (not np.array_equal(batch, ref)))
