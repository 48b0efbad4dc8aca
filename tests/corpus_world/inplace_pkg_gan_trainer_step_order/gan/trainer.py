import torch
import torch.nn.functional as F


def train_step(G, D, opt_g, opt_d, real):
    fake = G(torch.randn(real.shape[0], 3))
    d_fake = D(fake)  # <- saved
    d_real = D(real)
    loss_d = F.softplus(-d_real).mean() + F.softplus(d_fake).mean()
    opt_d.zero_grad()
    loss_d.backward(retain_graph=True)
    opt_d.step()  # <- culprit
    loss_g = F.softplus(-d_fake).mean()
    opt_g.zero_grad()
    loss_g.backward()  # <- backward
    opt_g.step()
    return loss_d.item(), loss_g.item()
