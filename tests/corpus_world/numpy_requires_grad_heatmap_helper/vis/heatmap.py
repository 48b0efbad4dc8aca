import torch


def plot_multi_heatmap(*arrays):
    grids = []
    for array in arrays:
        if isinstance(array, torch.Tensor):
            array = array.cpu().numpy()  # <- culprit
        grids.append((array - array.min()) / (array.max() - array.min() + 1e-8))
    return grids
