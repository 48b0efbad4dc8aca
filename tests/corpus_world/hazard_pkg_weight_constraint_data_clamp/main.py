# source: https://github.com/jiamings/wgan/issues/2
# expect-kind: none
# expect-hazard: silent-saved-tensor-write
# The critic in a model package offers constrain(), which clips its weights
# through .data; the script calls it between the generator's forward through
# the critic and the generator's backward.
import torch

from models.critic import Critic

torch.manual_seed(0)
G = torch.nn.Linear(2, 2)
critic = Critic()
loss_g = -critic(G(torch.randn(8, 2))).mean()
critic.constrain(0.01)
loss_g.backward()  # <- backward
print("grad", G.weight.grad.flatten())
