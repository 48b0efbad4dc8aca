# Twin of 17: each epoch's total cloned into the history
import torch

total = torch.zeros(2)
history, refs = [], []
for epoch in range(3):
    total.zero_()
    for batch in range(4):
        total += torch.tensor([1.0, float(epoch)])
    history.append(total.detach().clone())
    refs.append(total.detach().clone())
print("history", [h.tolist() for h in history])
print("TRUTH changed=%s" % (not torch.equal(history[0], refs[0])))
