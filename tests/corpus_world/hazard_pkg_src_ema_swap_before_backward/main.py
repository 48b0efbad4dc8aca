# source: https://github.com/akanimax/pro_gan_pytorch/pull/37
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# A src-layout training kit copies the EMA weights into the live model through
# .data (to log an EMA sample) between the forward and the backward of the
# training loss.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from trainkit.ema import EMA  # noqa: E402

torch.manual_seed(0)
net = nn.Linear(3, 3, bias=False)
ema = EMA(net)
x = torch.randn(2, 3, requires_grad=True)
loss = net(x).pow(2).sum()  # <- saved
ema.copy_to(net)
loss.backward()  # <- backward
print("grad", x.grad[0])
