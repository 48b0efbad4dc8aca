# expand() repeats size-1 dimensions WITHOUT copying: the new dimension gets
# stride 0, so every row reads the same memory. Only size-1 dims can be expanded.
import torch

torch.manual_seed(0)
row = torch.tensor([[1.0, 2.0, 3.0]])        # shape (1, 3)
big = row.expand(4, -1)                      # shape (4, 3), no copy

print("big.shape:", tuple(big.shape), "| big.stride():", big.stride())   # (4, 3) (0, 1)
print("same storage:", row.untyped_storage()._cdata == big.untyped_storage()._cdata)  # True
print("elements stored:", big.untyped_storage().nbytes() // big.element_size(), "| elements seen:", big.numel())  # 3 | 12
row[0, 1] = 20.0                             # every "row" of big sees this
print("big column 1:", big[:, 1].tolist())

m = torch.tensor([[1, 2, 3], [4, 5, 6]])     # shape (2, 3): dim 0 has size 2, not 1
try:
    m.expand(3, -1)
except RuntimeError as err:
    print("expand(3, -1) on a (2, 3) tensor raises:", str(err).splitlines()[0])
