import torch.nn as nn


def build_discriminator(slope, memory_efficient=True):
    act = nn.LeakyReLU(slope)
    if memory_efficient:
        act = nn.LeakyReLU(slope, inplace=True)  # <- culprit
    return nn.Sequential(nn.Linear(8, 16), act, nn.Linear(16, 1))
