import torch
import torch.nn.functional as F


def train_step(G, D, opt_g, opt_d, real):
    fake = G(torch.randn(real.shape[0], 3))
    loss_d = F.softplus(-D(real)).mean() + F.softplus(D(fake.detach())).mean()
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    loss_g = F.softplus(-D(fake)).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    return round(loss_d.item(), 4), round(loss_g.item(), 4)
