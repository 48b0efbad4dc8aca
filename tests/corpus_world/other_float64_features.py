# source: https://github.com/xianglin226/scMDC/issues/8
# expect-kind: other
# The count matrix comes from NumPy as float64 and is turned into a tensor with
# torch.from_numpy, while the autoencoder's weights are float32.
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
counts = np.random.default_rng(0).poisson(2.0, size=(8, 20)).astype(np.float64)
x = torch.from_numpy(np.log1p(counts))  # <- culprit
encoder = nn.Sequential(nn.Linear(20, 8), nn.ReLU(), nn.Linear(8, 4))
decoder = nn.Linear(4, 20)
recon = decoder(encoder(x))  # <- culprit-alt
loss = nn.functional.mse_loss(recon, x)
loss.backward()
