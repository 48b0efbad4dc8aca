import torch.nn as nn


def make_model():
    return nn.Sequential(nn.BatchNorm1d(3), nn.Tanh())
