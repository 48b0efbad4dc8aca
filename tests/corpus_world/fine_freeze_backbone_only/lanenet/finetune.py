def freeze_backbone(net):
    for param in net.model.parameters():
        param.requires_grad = False
