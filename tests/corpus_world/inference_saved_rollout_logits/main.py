# source: https://github.com/unslothai/unsloth/issues/2434
# expect-kind: inference-tensor-saved
# GRPO-style step: the sampler in the package generates completions under
# @torch.inference_mode() and also hands back its hidden states, which the
# training loss then feeds through the trainable policy head.
import torch

from rl.policy import Policy
from rl.sampler import generate

torch.manual_seed(0)
policy = Policy(hidden=8, vocab=11)
opt = torch.optim.Adam(policy.parameters(), lr=1e-4)
prompt = torch.randint(0, 11, (2, 3))
tokens, hidden = generate(policy, prompt, steps=4)
advantages = torch.randn(2, 1)
logp = policy.head(hidden).log_softmax(-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
loss = -(advantages * logp).mean()
opt.zero_grad()
loss.backward()
opt.step()
