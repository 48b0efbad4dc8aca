# Rewritten from pytorch/pytorch#47599: the gradient through eigh's eigenvectors divides by the gaps between
# eigenvalues, infinite when two are equal (a covariance of whitened features).
# expect: kind=silent-non-finite-value line=8 op=LinalgEighBackward0 phase=backward sink=grad sink_line=10 sink_step=0
import torch

feats = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]], requires_grad=True)
cov = feats.T @ feats / 4
evals, evecs = torch.linalg.eigh(cov)
loss = evecs[:, -1].abs().sum() + evals.sum()
loss.backward()
print("grad", feats.grad)
