import torch


class DeepFool:
    def __init__(self, model, steps=3, overshoot=0.02):
        self.model = model
        self.steps = steps
        self.overshoot = overshoot

    def __call__(self, images, labels):
        image = images.clone()
        for _ in range(self.steps):
            image.requires_grad = True  # <- culprit
            out = self.model(image)
            score = out[0, labels[0]]
            grad, = torch.autograd.grad(score, image)
            image = image - (1 + self.overshoot) * grad.sign() * 0.01
        return image
