# source: https://github.com/pytorch/examples/issues/116 (a DCGAN written without fake.detach() in the discriminator step: backward through the graph a second time)
# expect-kind: backward-twice
# measured (torch 2.13.0+cpu, python alone): the leak raises RuntimeError 'Trying to backward through the graph a second time' at errG.backward() of step 0; the twin runs all 3 steps
import torch

torch.manual_seed(0)
netG = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16), torch.nn.Tanh())
netD = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.LeakyReLU(0.2), torch.nn.Linear(32, 1))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4)
optD = torch.optim.Adam(netD.parameters(), lr=2e-4)
bce = torch.nn.BCEWithLogitsLoss()
for step in range(3):
    real = torch.randn(4, 16)
    fake = netG(torch.randn(4, 8))
    netD.zero_grad()
    errD = bce(netD(real), torch.ones(4, 1))
    out_fake = netD(fake)  # CULPRIT FIX: out_fake = netD(fake.detach())
    errD = errD + bce(out_fake, torch.zeros(4, 1))
    errD.backward()
    optD.step()
    netG.zero_grad()
    errG = bce(netD(fake), torch.ones(4, 1))
    errG.backward()
    optG.step()
print("done")
