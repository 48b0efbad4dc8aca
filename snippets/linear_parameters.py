# An nn.Linear layer owns two Parameters (weight, bias): leaves with
# requires_grad=True whose .grad is None until the first backward. The input does
# not require grad and never gets a .grad; the output is a non-leaf.
import torch

torch.manual_seed(0)
layer = torch.nn.Linear(3, 2)
weight, bias = layer.weight, layer.bias      # names for the two parameters
for name, p in layer.named_parameters():
    print(f"{name}: shape {tuple(p.shape)} requires_grad={p.requires_grad} "
          f"is_leaf={p.is_leaf} grad={p.grad}")

inp = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])   # batch of 2
out = layer(inp)
loss = out.sum()
print("out: is_leaf", out.is_leaf, "| grad_fn", type(out.grad_fn).__name__)
loss.backward()
print("weight.grad:", weight.grad.tolist())  # each row = column sums of inp: [5, 7, 9]
print("bias.grad:", bias.grad.tolist())      # batch size: [2, 2]
print("inp.requires_grad:", inp.requires_grad, "| inp.grad:", inp.grad)
