import torch
import torch.nn as nn


class MoEBlock(nn.Module):
    def __init__(self, dim, n_experts):
        super().__init__()
        self.router = nn.Linear(dim, n_experts)
        self.experts = nn.ModuleList([nn.Linear(dim, dim) for _ in range(n_experts)])
        self.register_buffer("bias", torch.zeros(n_experts))

    def forward(self, x):
        logits = self.router(x) + self.bias
        choice = logits.argmax(dim=1)
        counts = torch.bincount(choice, minlength=len(self.experts))
        self.bias -= 0.5 * (counts.float() - counts.float().mean())  # <- culprit
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            idx = (choice == e).nonzero().squeeze(1)
            out[idx] = expert(x[idx])
        return out
