# Fine on its own (no bug twin): R-Drop (and consistency losses) call the model twice on one batch in training mode on purpose; the BatchNorm sees the batch twice as the objective does
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.BatchNorm1d(6), torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Dropout(0.3),
                            torch.nn.Linear(12, 3))
ref = torch.nn.BatchNorm1d(6)  # two updates per step, as the program means them
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(16, 6) * 2 + 1, torch.randint(0, 3, (16,))
    logits1, logits2 = model(x), model(x)  # two dropout masks
    ce = torch.nn.functional.cross_entropy(logits1, y) + torch.nn.functional.cross_entropy(logits2, y)
    kl = torch.nn.functional.kl_div(logits1.log_softmax(1), logits2.log_softmax(1), reduction="batchmean",
                                    log_target=True)
    with torch.no_grad():
        ref(x.clone())
        ref(x.clone())
    opt.zero_grad()
    (ce + kl).backward()
    opt.step()
print("TRUTH changed=%s" % (not torch.allclose(model[0].running_mean, ref.running_mean, atol=1e-6)))
