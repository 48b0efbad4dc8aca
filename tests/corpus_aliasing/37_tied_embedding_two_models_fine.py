# Fine on its own (no bug twin): an encoder and a decoder built as two models share one embedding on purpose (`decoder.embed.weight = encoder.embed.weight`) and are trained together by one optimizer
import torch

torch.manual_seed(0)
encoder = torch.nn.Sequential(torch.nn.Embedding(20, 8), torch.nn.Linear(8, 8))
decoder = torch.nn.Sequential(torch.nn.Embedding(20, 8), torch.nn.Linear(8, 20))
decoder[0].weight = encoder[0].weight  # one embedding table for both sides
opt = torch.optim.SGD(torch.nn.ModuleList([encoder, decoder]).parameters(), lr=0.1)
src, tgt = torch.randint(0, 20, (6, 5)), torch.randint(0, 20, (6, 5))
for step in range(3):
    h = encoder(src).mean(1, keepdim=True)
    logits = decoder[1](decoder[0](tgt) + h)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 20), tgt.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("TRUTH changed=%s" % (not torch.equal(decoder[0].weight, encoder[0].weight)))
