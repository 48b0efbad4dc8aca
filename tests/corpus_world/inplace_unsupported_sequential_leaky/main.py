# source: https://github.com/pytorch/pytorch/issues/37345
# expect-kind: inplace-backward-unsupported
# The discriminator in the package switches nn.LeakyReLU to inplace=True (its
# memory-saving default) and is given a negative slope; backward refuses it.
import torch

from nets.disc import build_discriminator

torch.manual_seed(0)
disc = build_discriminator(slope=-0.1)
x = torch.randn(4, 8)
score = disc(x).mean()
score.backward()  # <- backward
