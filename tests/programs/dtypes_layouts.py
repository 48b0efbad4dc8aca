"""dtypes and layouts: complex, float16, bfloat16, sparse COO, integer, zero-size, zero-dim,
non-contiguous, channels_last, meta, nested tensors."""
import gc
import weakref

import torch
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_printoptions(precision=8)

# complex
z = torch.tensor([1 + 2j, 3 - 1j, -0.5 + 0.25j], dtype=torch.complex128, requires_grad=True)
(z.abs() ** 2).sum().backward()
print("complex grad", z.grad)
zr = torch.view_as_real(z.detach())
print("view_as_real", zr.shape, zr.stride(), zr.dtype, zr.untyped_storage().nbytes())
zc = z.detach().clone()
zr2 = torch.view_as_real(zc)
zr2[0, 1] = 9.0
print("complex written through real view", zc, zc._version)

# float16 / bfloat16
for dt in (torch.float16, torch.bfloat16):
    h = torch.tensor([0.1, 0.2, 1000.0, -3.5], dtype=dt, requires_grad=True)
    (h * h + h.exp().clamp(max=100)).sum().backward()
    print(dt, h.grad, h.grad.dtype)

# integer
i = torch.arange(10, dtype=torch.int64)
i.mul_(3).add_(1)
i[2:5] = -1
print("int", i, i._version, (i // 4).tolist(), i.dtype)
try:
    i.requires_grad_()
except RuntimeError as err:
    print("error:", err)
u8 = torch.tensor([250, 5], dtype=torch.uint8)
print("uint8 wrap", (u8 + 10).tolist())
bl = torch.tensor([True, False]) & torch.tensor([True, True])
print("bool", bl)

# sparse COO
idx = torch.tensor([[0, 1, 1], [2, 0, 2]])
val = torch.tensor([3.0, 4.0, 5.0], requires_grad=True)
sp = torch.sparse_coo_tensor(idx, val, (2, 3))
dense = torch.arange(6.0).reshape(3, 2)
res = torch.sparse.mm(sp, dense)
res.sum().backward()
print("sparse", sp.is_sparse, sp.layout, res.tolist(), val.grad)
spc = torch.sparse_coo_tensor(torch.tensor([[0, 0], [1, 1]]), torch.tensor([1.0, 2.0]), (2, 2))
print("coalesce", spc.is_coalesced(), spc.coalesce().values().tolist(), spc.to_dense().tolist())
spl = torch.sparse_coo_tensor(idx, torch.tensor([1.0, 2.0, 3.0]), (2, 3), requires_grad=True)
spl.to_dense().pow(2).sum().backward()
print("sparse leaf grad", spl.grad.layout, spl.grad.to_dense().tolist())

# zero-size and zero-dim
e = torch.empty(0, 3, requires_grad=True)
(e * 2).sum().backward()
print("zero-size", e.shape, e.grad.shape, e.numel(), e.data_ptr() == 0, e.sum().item())
e2 = torch.zeros(4, 0)
e2.add_(1)
print("zero-size inplace", e2._version, e2.shape)
s = torch.tensor(3.0, requires_grad=True)
(s ** 3).backward()
print("zero-dim", s.grad, s.dim(), s.item())
s0 = torch.tensor(2.0)
s0 += 1
print("zero-dim inplace", s0, s0._version)

# non-contiguous
m = torch.arange(24.0).reshape(4, 6).requires_grad_()
nc = m.t()[::2, 1:]
print("non-contiguous", nc.is_contiguous(), nc.stride(), nc.storage_offset(), nc.shape)
st = torch.as_strided(m, (3, 3), (6, 2), 1)
(nc.sum() + st.pow(2).sum()).backward()
print("grad", m.grad.tolist())
ex = torch.ones(3, 1).expand(3, 4)
print("expand", ex.stride(), ex.is_contiguous())
try:
    ex.add_(1)
except RuntimeError as err:
    print("error:", err)
mm = torch.zeros(4, 6)
mm.t()[1:3, ::2].fill_(7)
print("write through non-contiguous view", mm.tolist(), mm._version)

# channels_last
conv = torch.nn.Conv2d(3, 4, 3).double().to(memory_format=torch.channels_last)
img = torch.randn(2, 3, 6, 6, dtype=torch.float64).to(memory_format=torch.channels_last).requires_grad_()
o = conv(img)
print("channels_last", img.stride(), img.is_contiguous(memory_format=torch.channels_last), o.shape,
      o.is_contiguous(memory_format=torch.channels_last))
o.sum().backward()
print("channels_last grad", img.grad.stride(), round(img.grad.sum().item(), 8), round(conv.weight.grad.sum().item(), 8))
pooled = F.max_pool2d(o, 2)
print("pool", pooled.stride())

# meta device
mt = torch.empty(5, 7, device="meta", requires_grad=True)
mo = (mt @ torch.empty(7, 2, device="meta")).relu()
mo.sum().backward()
print("meta", mo.shape, mo.device, mt.grad.shape, mt.grad.device, mo.is_meta)
try:
    mo.sum().item()
except Exception as err:
    print("error:", type(err).__name__, err)

# nested tensors
if hasattr(torch, "nested"):
    nt = torch.nested.nested_tensor([torch.arange(3.0), torch.arange(5.0)])
    print("nested", nt.is_nested, [t.tolist() for t in (nt * 2).unbind()])
    print("padded", torch.nested.to_padded_tensor(nt.sin(), 0.0).tolist())
    jt = torch.nested.nested_tensor([torch.ones(2, 4), torch.ones(3, 4)], layout=torch.jagged, requires_grad=True)
    jo = jt.sin()
    print("jagged", jt.layout, jo.shape[0], jo.shape[2], [round(t.sum().item(), 6) for t in jo.unbind()])

ref = weakref.ref(o)
del o, pooled
gc.collect()
print("freed", ref() is None)
