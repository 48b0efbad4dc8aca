# Rewritten from karpathy/nanoGPT#167 and openvla/openvla#30: a float16 exp overflows past 65504.
# expect: kind=silent-non-finite-value line=8 op=exp phase=forward sink=loss sink_line=11 sink_step=0
import torch

logits = torch.tensor([[2.0, 12.0, 1.0], [0.5, 0.1, 0.3]], requires_grad=True)
opt = torch.optim.SGD([logits], lr=0.1)
half = logits.half()
e = torch.exp(half)
probs = e / e.sum(dim=1, keepdim=True)
loss = -torch.log(probs[:, 0].float()).mean()
loss.backward()
opt.step()
print("loss", loss.item())
