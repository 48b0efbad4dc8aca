# new_tensor() always copies (new storage, requires_grad=False unless asked) and may
# change dtype/device. copy_() writes into an EXISTING tensor, keeping its dtype,
# device and storage; copying from a tensor that requires grad puts the destination
# into the graph (requires_grad=True, grad_fn=CopyBackwards).
import torch

torch.manual_seed(0)
src = torch.tensor([1.5, 2.5, 3.5], requires_grad=True)          # float32
n64 = src.new_tensor(src, dtype=torch.float64)   # float64 copy; torch warns: prefer detach().clone()
print("n64:", n64.dtype, "| requires_grad:", n64.requires_grad,
      "| shares storage:", n64.untyped_storage()._cdata == src.untyped_storage()._cdata)

dst = torch.zeros(3, dtype=torch.float64)                         # no grad, float64
before = dst.untyped_storage()._cdata
dst.copy_(src)                                                    # float32 -> float64
print("dst:", dst.tolist(), dst.dtype, "| requires_grad:", dst.requires_grad,
      "| grad_fn:", type(dst.grad_fn).__name__, "| is_leaf:", dst.is_leaf)
print("dst kept its storage:", dst.untyped_storage()._cdata == before,
      "| shares with src:", dst.untyped_storage()._cdata == src.untyped_storage()._cdata)
dst.sum().backward()                                              # grad flows back to src
print("src.grad:", src.grad.tolist())                             # [1, 1, 1]

if torch.cuda.is_available():                                     # device part: GPU only
    on_gpu = src.new_tensor([0.0, 0.0, 0.0], device="cuda")
    on_gpu.copy_(src)                                             # CPU -> CUDA copy
    print("on_gpu:", on_gpu.device, "| grad_fn:", type(on_gpu.grad_fn).__name__)
