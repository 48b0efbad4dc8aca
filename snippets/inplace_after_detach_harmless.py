# pow (y = x ** 2) saves its INPUT x, not its output y. Zeroing y through a
# detach() alias bumps y's version, but y is not needed by backward, so backward
# succeeds and x.grad is the correct 2 * x.
import torch

torch.manual_seed(0)
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = x ** 2                                   # PowBackward0 saves x (and the exponent)
y.detach().zero_()                           # modifies y's storage, y._version -> 1
print("y:", y.tolist(), "| y._version:", y._version, "| x._version:", x._version)
y.sum().backward()                           # fine: only x was saved
print("x.grad:", x.grad.tolist())            # [2, 4, 6] == 2 * x
print("correct:", torch.equal(x.grad, 2 * x.detach()))
