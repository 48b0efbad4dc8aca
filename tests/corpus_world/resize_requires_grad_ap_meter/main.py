# source: https://github.com/meta-pytorch/tnt/issues/133
# expect-kind: resize-requires-grad
# The average-precision meter in the package is fed the raw model outputs; on
# the second batch it resizes its score buffer, which now requires grad.
import torch
import torch.nn as nn

from meters.apmeter import APMeter

torch.manual_seed(0)
model = nn.Linear(6, 4)
meter = APMeter()
for batch in range(2):
    x = torch.randn(3, 6)
    target = torch.randint(0, 2, (3, 4))
    output = model(x)
    meter.add(output, target)  # <- culprit-alt
print(meter.scores.shape)
