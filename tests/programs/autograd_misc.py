"""Double backward, autograd.grad(inputs=...), retain_grad, tensor hooks, module hooks."""
import gc
import weakref

import torch
import torch.nn as nn

torch.manual_seed(0)
x = torch.tensor([0.5, -1.5, 2.0], dtype=torch.float64, requires_grad=True)
y = (x ** 3).sum()
(g,) = torch.autograd.grad(y, x, create_graph=True)
(g2,) = torch.autograd.grad(g.sum(), x)
print("double", g.tolist(), g2.tolist())

# backward(create_graph=True) then backward through the gradient (warns about a reference cycle)
z = (x.sin() * x).sum()
z.backward(create_graph=True)
gx = x.grad
x.grad = None
gx.sum().backward()
print("create_graph backward", gx.tolist(), x.grad.tolist())
x.grad = None

w = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
u = torch.tensor([3.0, -4.0], dtype=torch.float64, requires_grad=True)
loss = (w * u).pow(2).sum()
gw = torch.autograd.grad(outputs=loss, inputs=[w], retain_graph=True)
print("grad inputs=[w]", [t.tolist() for t in gw], u.grad)
loss.backward(inputs=[u])
print("backward inputs=[u]", w.grad, u.grad.tolist())
unused = torch.autograd.grad((w * 2).sum(), [w, u], allow_unused=True)
print("allow_unused", [None if t is None else t.tolist() for t in unused])
mat = torch.autograd.grad((w * 2).sum(), [w, u], allow_unused=True, materialize_grads=True)
print("materialize", [t.tolist() for t in mat])

# retain_grad on non-leaves
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
h = a * 2
h.retain_grad()
k = h.exp()
k.retain_grad()
k.sum().backward()
print("retain_grad", h.grad.tolist(), k.grad.tolist(), h.retains_grad, a.retains_grad)
# .grad of a non-leaf without retain_grad: torch warns (stderr must be identical)
m = a * 3
m.sum().backward()
print("non-leaf grad", m.grad)

# tensor hooks
log = []
p = torch.tensor([1.0, -1.0], requires_grad=True)
q = p * 3
q.register_hook(lambda grad: log.append(("q", grad.tolist())) or grad * 10)
handle = p.register_hook(lambda grad: log.append(("p", grad.tolist())))
p.register_post_accumulate_grad_hook(lambda t: log.append(("post", t.grad.tolist())))
q.sum().backward()
handle.remove()
(p * 1).sum().backward()
print("tensor hooks", log, p.grad.tolist())

# module hooks
log.clear()
net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
for name, mod in net.named_children():
    mod.register_forward_pre_hook(lambda m, inp, name=name: log.append(("pre", name, tuple(inp[0].shape))))
    mod.register_forward_hook(lambda m, inp, out, name=name: log.append(("fwd", name, tuple(out.shape))))
    mod.register_full_backward_hook(
        lambda m, gin, gout, name=name: log.append(("bwd", name, [None if t is None else round(t.sum().item(), 10) for t in gin]))
    )
    mod.register_full_backward_pre_hook(lambda m, gout, name=name: log.append(("bwdpre", name)))
inp = torch.randn(2, 3, requires_grad=True)
net(inp).sum().backward()
for entry in log:
    print("module hook", entry)
print("module grads", [round(v, 6) for v in inp.grad.flatten().tolist()])

ref = weakref.ref(k)
del k, h
gc.collect()
print("freed", ref() is None)
