# source: https://github.com/flatironinstitute/pytorch-finufft/issues/110
# expect-kind: forward-ad
# Forward-mode AD through a custom autograd.Function from the package that only
# defines backward (no jvp).
import torch
import torch.autograd.forward_ad as fwAD

from nufft.ops import type1

torch.manual_seed(0)
points = torch.rand(8) * 6.28
values = torch.randn(8)
with fwAD.dual_level():
    dual_values = fwAD.make_dual(values, torch.ones(8))
    spectrum = type1(points, dual_values, n_modes=5)
    print(fwAD.unpack_dual(spectrum).tangent)
