# Rewritten from pytorch/pytorch#31557 and k2-fsa/icefall#135: a CTC loss over an utterance whose frames are fewer
# than its target needs (a repeated label needs a blank between), so the loss is inf.
# expect: kind=silent-non-finite-value line=15 op=ctc_loss phase=forward sink=loss sink_line=17 sink_step=0
import torch
import torch.nn.functional as F

torch.manual_seed(0)
frames = torch.randn(4, 2, 6)
proj = torch.nn.Linear(6, 5)
opt = torch.optim.SGD(proj.parameters(), lr=0.1)
targets = torch.tensor([[1, 2, 3, 4], [1, 1, 2, 2]])
input_lengths = torch.tensor([4, 4])
target_lengths = torch.tensor([3, 4])
log_probs = proj(frames).log_softmax(dim=2)
loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths)
opt.zero_grad()
loss.backward()
opt.step()
print("loss", loss.item())
