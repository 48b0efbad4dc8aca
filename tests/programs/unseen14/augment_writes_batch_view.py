# From: pytorch/vision#517 and #520 (Normalize worked in place: "note on in-place nature of Normalize") and
# rosinality/style-based-gan-pytorch#38: an augmentation that scales its argument in place, given a slice
# of the in-memory data set, drifts the data set at every epoch. Our own program.
# truth (torch 2.13.0+cpu): the program prints TRUTH changed=True, its twin (FIX applied) TRUTH changed=False
# expect-kind: kept-value-changed
import torch


def jitter(x, scale):
    x.mul_(scale)  # CULPRIT FIX: x = x * scale
    return x


torch.manual_seed(0)
X, Y = torch.randn(32, 8), torch.randn(32, 1)
ref = X.clone()
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for epoch in range(3):
    for i in range(0, 32, 8):
        xb = jitter(X[i:i + 8], 1.1)
        loss = torch.nn.functional.mse_loss(model(xb), Y[i:i + 8])
        opt.zero_grad()
        loss.backward()
        opt.step()
print("TRUTH changed=%s" % (not torch.equal(X, ref)))
