# source: https://github.com/lyongo/NWPU-MOC/issues/4
# expect-kind: inplace-modified-saved-tensor
# expect-node: ReluBackward0
# The FPN head in models/FPN/FPN_Head.py adds the upsampled coarser lateral
# into the finer one with +=, writing a relu output that was saved.
import torch

from models.FPN.FPN_Head import FPNHead

torch.manual_seed(0)
head = FPNHead(2, 3)
feats = [torch.randn(1, 2, 8, 8), torch.randn(1, 2, 4, 4), torch.randn(1, 2, 2, 2)]
loss = head(feats).mean()
loss.backward()  # <- backward
