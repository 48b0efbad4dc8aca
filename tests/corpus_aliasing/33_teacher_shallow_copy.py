# From: reports of a mean-teacher / frozen reference model made with `copy.copy(model)`, whose outputs then follow the model being trained (our own program)
import copy

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(5, 12), torch.nn.Tanh(), torch.nn.Linear(12, 5))
reference = copy.copy(model)  # a frozen reference for a KL penalty
probe = torch.randn(4, 5)
with torch.no_grad():
    reference_at_start = reference(probe).clone()  # what a frozen reference answers: recorded once
opt = torch.optim.Adam(model.parameters(), lr=0.05)
x, y = torch.randn(64, 5), torch.randn(64, 5)
for step in range(4):
    with torch.no_grad():
        ref_logp = reference(x).log_softmax(1)
    out = model(x)
    kl = torch.nn.functional.kl_div(out.log_softmax(1), ref_logp, reduction="batchmean", log_target=True)
    loss = torch.nn.functional.mse_loss(out, y) + 0.1 * kl
    opt.zero_grad()
    loss.backward()
    opt.step()  # <- culprit
with torch.no_grad():
    print("TRUTH changed=%s" % (not torch.allclose(reference(probe), reference_at_start)))
