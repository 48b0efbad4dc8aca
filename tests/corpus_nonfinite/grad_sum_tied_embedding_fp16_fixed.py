# Rewritten from NVIDIA/apex#192 and apache/mxnet#17703: float16 input and output embeddings tied to one weight under a static loss scale; each use's gradient is finite, their sum in backward passes 65504.
# expect: clean
import torch

emb = torch.full((4, 8), 0.25, dtype=torch.float16, requires_grad=True)
tokens = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
x = emb[tokens]
logits = x @ emb.t()
loss = logits.float().pow(2).mean()
scale = 2.0 ** 16
(loss * scale).backward()
print("grad max", emb.grad.float().abs().max().item())
