import torch


def refine(frames, steps):
    rotations = torch.tanh(frames)
    coords = torch.zeros_like(frames)
    for _ in range(steps):
        coords = coords + rotations * rotations  # <- saved
        rotations.detach_()  # <- culprit
    return coords
