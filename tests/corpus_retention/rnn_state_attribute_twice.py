# source: https://github.com/OpenNMT/OpenNMT-py/issues/403 (the decoder's state kept on the object without detach: backward a second time)
# expect-kind: backward-twice
# measured (torch 2.13.0+cpu, python alone): the leak raises RuntimeError 'Trying to backward through the graph a second time' at the second backward; the twin runs all 3 steps
import torch


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = torch.nn.GRUCell(8, 8)
        self.hidden = torch.zeros(2, 8)

    def forward(self, x):
        h = self.cell(x, self.hidden)
        self.hidden = h  # CULPRIT FIX: self.hidden = h.detach()
        return h


torch.manual_seed(0)
dec = Decoder()
opt = torch.optim.SGD(dec.parameters(), lr=0.1)
for step in range(3):
    out = dec(torch.randn(2, 8))
    loss = out.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
