# source: https://github.com/pytorch/pytorch/pull/122639
# expect-kind: forward-ad
# A sensitivity analysis with forward-mode AD runs through torch.unique (used
# to count clusters), an op with no forward-mode derivative.
import torch
import torch.autograd.forward_ad as fwAD

torch.manual_seed(0)
scores = torch.randn(6)
direction = torch.ones(6)
with fwAD.dual_level():
    s = fwAD.make_dual(scores, direction)
    rounded = torch.round(s * 2) / 2
    levels = rounded
    levels = torch.unique(levels)  # <- culprit
    spread = levels.max() - levels.min()
    print(fwAD.unpack_dual(spread).tangent)
