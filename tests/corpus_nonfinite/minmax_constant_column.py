# Rewritten from avalonstrel/GatedConvolution_pytorch#27: (x - min) / (max - min) of an image whose max equals its min.
# expect: kind=silent-non-finite-value line=8 op=div phase=forward sink=loss sink_line=11 sink_step=0
import torch

imgs = torch.stack([torch.linspace(0, 1, 4), torch.full((4,), 0.5)])
lo = imgs.min(dim=1, keepdim=True).values
hi = imgs.max(dim=1, keepdim=True).values
scaled = (imgs - lo) / (hi - lo)
w = torch.ones(4, requires_grad=True)
loss = (scaled * w).sum()
loss.backward()
print("grad", w.grad)
