import torch


@torch.inference_mode()  # <- culprit
def generate(policy, prompt, steps):
    h = policy.embed(prompt).mean(1)
    tokens, states = [], []
    tok = prompt[:, -1]
    for _ in range(steps):
        h = policy.cell(policy.embed(tok), h)
        states.append(h)
        tok = policy.head(h).argmax(-1)
        tokens.append(tok)
    return torch.stack(tokens, 1), torch.stack(states, 1)
