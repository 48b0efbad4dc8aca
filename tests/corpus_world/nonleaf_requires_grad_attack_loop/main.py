# source: https://github.com/Harry24k/adversarial-attacks-pytorch/issues/2
# expect-kind: non-leaf-requires-grad
# DeepFool in the package updates the image with its gradient step and, on the
# next iteration, sets requires_grad on the updated image, which is no longer a leaf.
import torch
import torch.nn as nn

from attacks.deepfool import DeepFool

torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(12, 3))
images = torch.rand(1, 3, 2, 2)
labels = torch.tensor([1])
adv = DeepFool(model, steps=3)(images, labels)
print(adv.shape)
