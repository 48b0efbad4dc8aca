class GradCAM:
    def __init__(self, model, layer):
        self.model = model
        self.acts = None
        self.grads = None
        layer.register_forward_hook(self._save)

    def _save(self, module, inp, out):
        self.acts = out
        out.register_hook(lambda g: setattr(self, "grads", g))

    def __call__(self, x, class_idx=None):
        logit = self.model(x)
        if class_idx is None:
            score = logit.max(1)[0]  # <- culprit-alt
        else:
            score = logit[:, class_idx].sum()
        self.model.zero_grad()
        score.backward()  # <- culprit <- backward
        weights = self.grads.mean((2, 3), keepdim=True)
        return (weights * self.acts).sum(1).relu()
