import torch.nn as nn


def make_nets():
    G = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
    D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    return G, D
