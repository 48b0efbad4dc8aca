import torch
import torch.nn.functional as F


class SMARTLoss:
    def __init__(self, eval_fn, noise_var=1e-5, step_size=1e-3):
        self.eval_fn = eval_fn
        self.noise_var = noise_var
        self.step_size = step_size

    def __call__(self, embed, state):
        noise = torch.randn_like(embed, requires_grad=True) * self.noise_var
        embed_perturbed = embed + noise
        state_perturbed = self.eval_fn(embed_perturbed)
        loss = F.kl_div(state_perturbed.log_softmax(-1), state.detach().softmax(-1), reduction="batchmean")
        noise_gradient, = torch.autograd.grad(loss, noise)  # <- backward
        noise = noise + self.step_size * noise_gradient
        return F.mse_loss(self.eval_fn(embed + noise), state)
