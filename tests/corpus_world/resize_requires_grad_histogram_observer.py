# source: https://github.com/pytorch/pytorch/pull/57068
# expect-kind: resize-requires-grad
# A histogram observer used during quantization-aware training computes its
# range from the activations, which require grad, and then resizes its buffer.
import torch
import torch.nn as nn


class HistogramObserver(nn.Module):
    def __init__(self, bins=8):
        super().__init__()
        self.bins = bins
        self.histogram = torch.zeros(bins)
        self.min_val = torch.tensor(float("inf"))

    def forward(self, x):
        combined_min = torch.minimum(x.min(), self.min_val)
        self.min_val = combined_min  # <- culprit
        self.min_val.resize_(combined_min.shape)
        self.histogram += torch.histc(x.detach(), self.bins)
        return x


torch.manual_seed(0)
lin = nn.Linear(4, 4)
obs = HistogramObserver()
out = obs(lin(torch.randn(8, 4)))
out.sum().backward()
