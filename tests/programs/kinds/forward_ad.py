import torch
import torch.autograd.forward_ad as fwAD

primal = torch.randn(3)
tangent = torch.randn(4)
with fwAD.dual_level():
    dual = fwAD.make_dual(primal, tangent)  # <- culprit
