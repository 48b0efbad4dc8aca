# Rewritten from karpathy/makemore's RNN with its cross_entropy written out by hand (softmax, then log of the
# target's probability): at a high learning rate a probability underflows to a denormal, the log is finite
# but its backward (grad / p) overflows float32.
# expect: kind=silent-non-finite-value line=14 op=LogBackward0 phase=backward sink=grad sink_line=16 sink_step=0
import torch
import torch.nn.functional as F

torch.manual_seed(0)
logits = torch.tensor([[0.0, 100.0], [1.0, 2.0]], requires_grad=True)
target = torch.tensor([0, 1])
opt = torch.optim.SGD([logits], lr=0.1)
for step in range(2):
    probs = F.softmax(logits, dim=-1)
    loss = -torch.log(probs.gather(1, target.unsqueeze(1))).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
