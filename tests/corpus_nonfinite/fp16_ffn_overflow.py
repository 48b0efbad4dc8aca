# Rewritten from huggingface/transformers#5651 and #9295: a float16 feed-forward output past 65504, then LayerNorm.
# expect: kind=silent-non-finite-value line=11 op=addmm phase=forward sink=loss sink_line=14 sink_step=0
import torch

torch.manual_seed(0)
h = (torch.rand(2, 8) * 4.0 + 8.0).half()
wo = torch.nn.Linear(8, 4).half()
with torch.no_grad():
    wo.weight.fill_(900.0)
opt = torch.optim.SGD(wo.parameters(), lr=1e-4)
out = wo(h)
normed = torch.nn.functional.layer_norm(out, (4,))
loss = normed.float().pow(2).mean()
loss.backward()
opt.step()
print("loss", loss.item())
