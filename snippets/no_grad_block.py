# Inside torch.no_grad() no graph is recorded: results have requires_grad=False
# and no grad_fn even when the inputs require grad. Outside, the same op is tracked.
import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)

with torch.no_grad():
    inside = w * 2
    print("grad enabled inside:", torch.is_grad_enabled())           # False
print("inside.requires_grad:", inside.requires_grad, "| grad_fn:", inside.grad_fn)  # False None
print("inside.is_leaf:", inside.is_leaf)                              # True

outside = w * 2
print("grad enabled outside:", torch.is_grad_enabled())               # True
print("outside.requires_grad:", outside.requires_grad, "| grad_fn:", type(outside.grad_fn).__name__)
print("same values:", torch.equal(inside, outside.detach()))          # True
