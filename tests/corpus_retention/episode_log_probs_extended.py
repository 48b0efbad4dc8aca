# source: pytorch/examples reinforcement_learning/reinforce.py (REINFORCE: an episode's log-probabilities are kept in a list until after the optimizer step, then cleared); the leak: every episode's log-probabilities also kept "for the entropy plot" (review18)
# expect-kind: graph-kept-alive
# measured (torch 2.13.0+cpu, tests/retention_truth.py, N=8 vs 16 steps): leak +490 B/step peak tensor memory, +346 graph nodes/step held by globals; twin +490 B/step (its episodes grow too), +0 nodes/step (its current episode's graph, alive when backward returns and freed after the step, grows with the episodes)
import os

import torch
import torch.nn.functional as F

torch.manual_seed(0)
policy = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
saved_log_probs, rewards = [], []
history = []  # every action's log-probability, for the entropy plot


def finish_episode():
    returns = torch.tensor(rewards).flip(0).cumsum(0).flip(0)
    returns = (returns - returns.mean()) / (returns.std() + 1e-6)
    loss = torch.cat([-lp * r for lp, r in zip(saved_log_probs, returns)]).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    history.extend(saved_log_probs)  # CULPRIT FIX: history.extend(lp.detach() for lp in saved_log_probs)
    del saved_log_probs[:]
    del rewards[:]


for episode in range(int(os.environ.get("LEAK_STEPS", "12"))):
    state = torch.randn(1, 4)
    for t in range(4 + 3 * episode):  # the policy learns: each episode is longer than the last
        probs = F.softmax(policy(state), dim=1)
        action = torch.multinomial(probs, 1)
        saved_log_probs.append(probs.gather(1, action).log().squeeze(1))
        rewards.append(1.0)
        state = state + 0.1 * torch.randn(1, 4)
    finish_episode()
print(len(history))
