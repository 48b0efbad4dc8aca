# source: https://github.com/XiaMooo/Yolo-Detect-Layer-Visualization/issues/1
# expect-kind: numpy-requires-grad
# The plotting helper in the package converts the detection-head maps with
# array.cpu().numpy(); the maps come straight from the model and require grad.
import torch
import torch.nn as nn

from vis.heatmap import plot_multi_heatmap

torch.manual_seed(0)
head = nn.Conv2d(8, 3, 1)
feats = torch.randn(1, 8, 6, 6)
maps = head(feats)[0]
grids = plot_multi_heatmap(*maps)
print(len(grids))
