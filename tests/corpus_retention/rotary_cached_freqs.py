# source: https://github.com/lucidrains/rotary-embedding-torch/issues/18 (learned rotary frequencies cached at the first forward: the second loss.backward() fails)
# expect-kind: backward-twice
# measured (torch 2.13.0+cpu, python alone): the leak raises RuntimeError 'Trying to backward through the graph a second time' at the backward of step 1; the twin runs all 3 steps
import torch


class Rotary(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.freqs = torch.nn.Parameter(1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.cached = None

    def forward(self, x):
        if self.cached is None or self.cached.shape[0] < x.shape[1]:
            t = torch.arange(x.shape[1], dtype=torch.float32)
            self.cached = torch.outer(t, self.freqs)  # CULPRIT FIX: return self.rotate(x, torch.outer(torch.arange(x.shape[1], dtype=torch.float32), self.freqs))
        return self.rotate(x, self.cached[: x.shape[1]])

    @staticmethod
    def rotate(x, angles):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.cat([x1 * angles.cos() - x2 * angles.sin(), x1 * angles.sin() + x2 * angles.cos()], dim=-1)


torch.manual_seed(0)
rot = Rotary(16)
proj = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(list(rot.parameters()) + list(proj.parameters()), lr=0.01)
for step in range(3):
    x = torch.randn(2, 10, 16)
    loss = proj(rot(x)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
