# Rewritten from keras-team/keras#590 and pytorch/pytorch#3336: a Poisson loss written by hand, rate - y * log(rate),
# with a rate from a ReLU that is 0 for one sample.
# expect: clean
import torch

torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
with torch.no_grad():
    model.weight.copy_(torch.tensor([[1.0, -1.0, 0.5]]))
    model.bias.zero_()
opt = torch.optim.Adam(model.parameters(), lr=0.01)
x = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.5, 0.5, 1.0]])
counts = torch.tensor([[2.0], [0.0], [1.0]])
rate = torch.relu(model(x))
loss = (rate - counts * torch.log(rate + 1e-8)).mean()
opt.zero_grad()
loss.backward()
opt.step()
print("loss", loss.item())
