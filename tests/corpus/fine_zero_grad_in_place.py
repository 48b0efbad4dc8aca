# expect-kind: none
# zero_grad(set_to_none=False) zeroes the .grad tensors in place every step.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x = torch.randn(16, 4)
labels = torch.randint(0, 2, (16,))
for step in range(10):
    opt.zero_grad(set_to_none=False)
    loss = nn.functional.cross_entropy(model(x), labels)
    loss.backward()
    opt.step()
print(loss.item() > 0)
