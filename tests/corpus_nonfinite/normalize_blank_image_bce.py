# Rewritten from pytorch/examples vae/main.py with its input divided by its norm: a blank image is 0/0.
# expect: kind=non-finite-value line=35 op=div phase=forward sink=none
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc21, self.fc22 = nn.Linear(16, 8), nn.Linear(8, 2), nn.Linear(8, 2)
        self.fc3, self.fc4 = nn.Linear(2, 8), nn.Linear(8, 16)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        mu, logvar = self.fc21(h), self.fc22(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z)))), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
images = torch.rand(12, 16)
images[7] = 0.0  # a blank image, in the second batch
for step in range(3):
    data = images[4 * step:4 * step + 4]
    data = data / data.norm(dim=1, keepdim=True)
    opt.zero_grad()
    recon, mu, logvar = model(data)
    loss = loss_function(recon, data, mu, logvar)
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 3))
