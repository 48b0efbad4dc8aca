import torch.nn as nn


def build_discriminator(slope):
    act = nn.LeakyReLU(slope, inplace=True)  # <- culprit
    return nn.Sequential(nn.Linear(8, 16), act, nn.Linear(16, 1))
