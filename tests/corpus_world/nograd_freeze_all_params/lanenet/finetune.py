def load_and_freeze(net, state):
    backbone = {k: v for k, v in state.items() if k.startswith("model")}
    net.load_state_dict(backbone, strict=False)
    for param in net.parameters():
        param.requires_grad = False  # <- culprit
