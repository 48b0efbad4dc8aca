# source: https://github.com/xianglin226/scMDC/issues/8
# expect-kind: other
# The count matrix is scaled by NumPy gene weights (float64 by default), which
# makes it float64; torch.from_numpy keeps that, while the weights are float32.
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
counts = np.log1p(np.random.default_rng(0).poisson(2.0, size=(8, 20)).astype(np.float32))
gene_weights = np.ones(20)
counts = counts * gene_weights  # <- culprit
x = torch.from_numpy(counts)
encoder = nn.Sequential(nn.Linear(20, 8), nn.ReLU(), nn.Linear(8, 4))
decoder = nn.Linear(4, 20)
recon = decoder(encoder(x))  # <- culprit-alt
loss = nn.functional.mse_loss(recon, x)
loss.backward()
