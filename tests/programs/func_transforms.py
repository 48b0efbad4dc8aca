"""torch.func transforms: grad, vjp, jvp, jacrev, jacfwd, hessian, vmap, functional_call."""
import gc
import weakref

import torch
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

torch.manual_seed(0)


def f(x):
    return (x.sin() * x.cos() + x ** 3).sum()


x = torch.linspace(-1, 1, 5, dtype=torch.float64)
print("grad", grad(f)(x).tolist())
out, vjp_fn = vjp(lambda t: t.exp() * 2, x)
print("vjp", out.tolist(), vjp_fn(torch.ones_like(x))[0].tolist())
print("jvp", [t.tolist() for t in jvp(lambda t: t.tanh(), (x,), (torch.ones_like(x),))])
print("jacrev", jacrev(lambda t: t.sin() * t)(x[:3]).tolist())
print("jacfwd", jacfwd(lambda t: t.cos() * t)(x[:3]).tolist())
print("hessian", hessian(f)(x[:3]).tolist())
a = torch.arange(12, dtype=torch.float64).reshape(3, 4)
b = torch.arange(12, 24, dtype=torch.float64).reshape(3, 4)
print("vmap dot", vmap(torch.dot)(a, b).tolist())
print("vmap grad", vmap(grad(f))(a / 10).tolist())
print("grad argnums", [g.tolist() for g in grad(lambda p, q: (p * q).sum(), argnums=(0, 1))(x, x * 2)])
value_and_grad = torch.func.grad_and_value(f)(x)
print("grad_and_value", value_and_grad[0].tolist(), value_and_grad[1].item())

model = torch.nn.Linear(3, 2).double()
params = {k: v.detach() for k, v in model.named_parameters()}
inp = torch.randn(4, 3, dtype=torch.float64)


def loss_fn(p, xb):
    return functional_call(model, p, (xb,)).pow(2).sum()


grads = grad(loss_fn)(params, inp)
print("functional_call grads", {k: v.tolist() for k, v in sorted(grads.items())})
per_sample = vmap(grad(loss_fn), in_dims=(None, 0))(params, inp.unsqueeze(1))
print("per-sample", {k: v.shape for k, v in sorted(per_sample.items())})
print("per-sample sum matches", all(torch.allclose(per_sample[k].sum(0), grads[k]) for k in grads))

tmp = grad(f)(x)
ref = weakref.ref(tmp)
del tmp
gc.collect()
print("freed", ref() is None)
