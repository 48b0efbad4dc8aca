# source: https://github.com/pytorch/pytorch/issues/586
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# expect-node: NativeBatchNormBackward0
# An input-gradient probe computed through the model in eval mode; before its
# backward, the training helper in the package runs a training-mode batch that
# updates the BatchNorm running statistics the eval output saved.
import torch

from net.model import make_model
from net.train import warmup

torch.manual_seed(0)
model = make_model()
model.eval()
probe = torch.randn(4, 3, requires_grad=True)
score = model(probe).pow(2).sum()  # <- saved
warmup(model, torch.randn(4, 3) * 4 + 2)
score.backward()  # <- backward
print("grad", probe.grad[0])
