# source: https://github.com/flatironinstitute/pytorch-finufft/issues/110
# expect-kind: none
# The package's custom Function implements jvp as well as backward, so forward
# mode AD and reverse mode both work.
import torch
import torch.autograd.forward_ad as fwAD

from nufft.ops import type1

torch.manual_seed(0)
points = torch.rand(8) * 6.28
values = torch.randn(8, requires_grad=True)
with fwAD.dual_level():
    spectrum = type1(points, fwAD.make_dual(values.detach(), torch.ones(8)), n_modes=5)
    print("tangent", fwAD.unpack_dual(spectrum).tangent.shape)
type1(points, values, n_modes=5).sum().backward()
print("grad", values.grad.shape)
