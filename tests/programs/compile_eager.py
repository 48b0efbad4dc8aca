"""torch.compile with backend="eager" and backend="aot_eager", plus a counting backend."""
import torch

torch.manual_seed(0)


def f(x, w):
    y = torch.sin(x) * w
    y = y + x.cos()
    return y.pow(2).sum()


graphs = []


def counting_backend(gm, example_inputs):
    graphs.append(len(gm.graph.nodes))
    return gm.forward


x = torch.randn(8, dtype=torch.float64, requires_grad=True)
w = torch.randn(8, dtype=torch.float64, requires_grad=True)
ref = f(x, w)
ref.backward()
gx, gw = x.grad.clone(), w.grad.clone()

for backend in ("eager", "aot_eager", counting_backend):
    torch._dynamo.reset()
    x.grad = w.grad = None
    cf = torch.compile(f, backend=backend, fullgraph=True)
    out = cf(x, w)
    out.backward()
    name = backend if isinstance(backend, str) else "counting"
    print(name, out.item(), torch.equal(out, ref), torch.allclose(x.grad, gx), torch.allclose(w.grad, gw))
    print(name, "grads", x.grad.tolist())

print("graphs seen by counting backend", graphs)


@torch.compile(backend="aot_eager")
def g(t):
    u = t.clone()
    u.mul_(2)
    return u.relu() + 1


print("aot_eager inplace", g(torch.arange(-2.0, 3.0)).tolist())
print("aot_eager second shape", g(torch.arange(-3.0, 4.0)).tolist())

# a compiled module: torch 2.2's dynamo copies its parameters to fake tensors through a TorchFunctionMode
# that compares func with torch._C's own Tensor.clone (NOTE [A wrapper equals its original])
lin = torch.nn.Linear(4, 3).double()
clin = torch.compile(lin, backend="eager")
xin = torch.randn(2, 4, dtype=torch.float64)
cout = clin(xin)
cout.sum().backward()
gw = lin.weight.grad.clone()
lin.weight.grad = None
lin(xin).sum().backward()
print("compiled module", torch.allclose(cout, lin(xin)), torch.allclose(gw, lin.weight.grad))
