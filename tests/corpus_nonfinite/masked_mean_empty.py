# Rewritten from INRIA/geoarches#88 and fairchem#441: a masked mean divides by the number of valid targets, which is 0 in a batch.
# expect: kind=silent-non-finite-value line=11 op=div phase=forward sink=loss sink_line=12 sink_step=0
import torch

pred = torch.tensor([0.2, 0.4, 0.9], requires_grad=True)
target = torch.tensor([0.0, 1.0, 1.0])
valid = torch.tensor([False, False, False])
opt = torch.optim.SGD([pred], lr=0.1)
err = (pred - target) ** 2 * valid
count = valid.sum()
loss = err.sum() / count
loss.backward()
opt.step()
print("loss", loss.item(), "pred", pred)
