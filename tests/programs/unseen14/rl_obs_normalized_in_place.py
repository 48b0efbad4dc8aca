# From: CleanDiffuserTeam/CleanDiffuser#13 (torch.from_numpy replaced by torch.tensor: the tensor shared the
# caller's array) and the observation normalisers of RL agents (Denys88/rl_games#186): act() normalises the
# observation in place through torch.as_tensor, so the replay buffer's stored observations change. Our own program.
# truth (torch 2.13.0+cpu): the program prints TRUTH changed=True, its twin (FIX applied) TRUTH changed=False
# expect-kind: kept-value-changed
import numpy as np
import torch


class Agent:
    def __init__(self):
        torch.manual_seed(0)
        self.pi = torch.nn.Linear(4, 2)
        self.mean, self.std = torch.full((4,), 0.5), torch.full((4,), 2.0)

    def act(self, obs):
        t = torch.as_tensor(obs)
        t -= self.mean  # CULPRIT FIX: t = t - self.mean
        t /= self.std
        with torch.no_grad():
            return int(self.pi(t).argmax())


rng = np.random.default_rng(0)
agent = Agent()
buffer, refs = [], []
for step in range(5):
    obs = rng.normal(size=4).astype(np.float32)
    refs.append(obs.copy())
    a = agent.act(obs)
    buffer.append((obs, a))
print("TRUTH changed=%s" % any(not np.array_equal(o, r) for (o, _), r in zip(buffer, refs)))
