# as_strided() builds a view from explicit sizes and strides over the same storage.
# In range it is a cheap view; out of range it RAISES on current PyTorch (older
# articles print garbage values for the second case). This program ends with the error.
import torch

torch.manual_seed(0)
x = torch.arange(1, 10).view(3, 3)           # 9 int64 elements = 72 bytes
diag = x.as_strided((3,), (4,))              # elements 0, 4, 8: the diagonal
print("diag:", diag.tolist(), "| stride:", diag.stride())          # [1, 5, 9] (4,)
print("same storage:", x.untyped_storage()._cdata == diag.untyped_storage()._cdata)
win = x.as_strided((2, 2), (3, 1), 4)        # 2x2 window starting at element 4
print("window:", win.tolist(), "| offset:", win.storage_offset())  # [[5, 6], [8, 9]] 4

# size (5, 5) with stride (0, 4) needs element 4*4 = 16, beyond the 9 that exist
bad = x.as_strided((5, 5), (0, 4))           # RuntimeError: setStorage ... out of bounds
print("never reached:", bad)
