# Rewritten from a report of a weighting term: log of the row sums of a data mask, one row of which is all zeros.
# expect: kind=silent-non-finite-value line=12 op=log phase=forward sink=loss sink_line=15 sink_step=3
import torch
torch.manual_seed(0)
w = torch.randn(4, 3, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
for step in range(5):
    x = torch.rand(8, 4)
    if step == 3:
        x[0] = 0.0
    h = x @ w
    weighted = torch.log(x.sum(1, keepdim=True)) * h
    loss = weighted.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", float(loss))
