# An optimizer whose parameters are of many kinds (a transposed float16, a bfloat16, a complex64, a strided float64,
# a float32, an int64 parameter); at the step after argv[1]'s parameter was set near its dtype's largest value, the
# step's own write makes it non-finite (x4, or NaN for "e"). "f": a second optimizer's parameter, which no backward
# reaches, set to NaN by the program. "none": every value stays finite. argv[2]: the device (default "cpu").
import sys

import torch


class Scale(torch.optim.Optimizer):
    """SGD on the parameters with a gradient, then p *= group["factor"] for every floating parameter: a step whose
    own write can pass a dtype's range."""

    def __init__(self, params):
        super().__init__(params, {"factor": 1.0})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-0.1)
                if p.is_floating_point() or p.is_complex():
                    p.mul_(group["factor"])


torch.manual_seed(0)
which = sys.argv[1] if len(sys.argv) > 1 else "none"
dev = sys.argv[2] if len(sys.argv) > 2 else "cpu"
w = torch.nn.Parameter(torch.randn(3, device=dev))
kinds = {
    "a": torch.nn.Parameter(torch.randn(3, 4, dtype=torch.float16, device=dev).t()),
    "b": torch.nn.Parameter(torch.randn(5, dtype=torch.bfloat16, device=dev)),
    "c": torch.nn.Parameter(torch.randn(2, 3, dtype=torch.complex64, device=dev)),
    "d": torch.nn.Parameter(torch.randn(8, dtype=torch.float64, device=dev)[::2]),
    "e": torch.nn.Parameter(torch.randn(2, 2, device=dev)),
}
count = torch.nn.Parameter(torch.arange(4, device=dev), requires_grad=False)
v = torch.nn.Parameter(torch.randn(3, 3, device=dev))
opt = Scale([{"params": [w, kinds["a"], kinds["b"], count]}, {"params": [kinds["c"], kinds["d"], kinds["e"]]}])
other = torch.optim.SGD([v], lr=0.1)
for step in range(6):
    loss = (w ** 2).sum()
    opt.zero_grad()
    loss.backward()
    if step == 2 and which == "f":
        with torch.no_grad():
            v[1, 1] = float("nan")
    if step == 2 and which in kinds:
        p = kinds[which]
        with torch.no_grad():
            if which == "c":
                p.imag.fill_(torch.finfo(torch.float32).max / 2)
            elif which != "e":
                p.fill_(torch.finfo(p.dtype).max / 2)
        for g in opt.param_groups:
            if any(q is p for q in g["params"]):
                g["factor"] = float("nan") if which == "e" else 4.0
    opt.step()
    other.step()
print("done", which)
