# source: https://github.com/pytorch/pytorch/issues/128971
# expect-kind: forward-ad
# A Jacobian-vector product of an attention block with forward-mode AD: the
# fused scaled_dot_product_attention kernel has no forward-mode derivative.
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

torch.manual_seed(0)
q = torch.randn(1, 2, 5, 4)
k = torch.randn(1, 2, 5, 4)
v = torch.randn(1, 2, 5, 4)
tangent = torch.randn_like(q)


def attention(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v)  # <- culprit
    return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1) @ v


with fwAD.dual_level():
    dual_q = fwAD.make_dual(q, tangent)
    out = attention(dual_q, k, v)
    jvp = fwAD.unpack_dual(out).tangent
print(jvp.shape)
