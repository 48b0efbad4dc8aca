# source: https://github.com/pytorch/pytorch/issues/34535
# expect-kind: none
# DQN with the detach on the target side only: Q(s, a) keeps its graph.
import torch
import torch.nn as nn

torch.manual_seed(0)
policy_net = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
target_net = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
target_net.load_state_dict(policy_net.state_dict())
opt = torch.optim.RMSprop(policy_net.parameters(), lr=1e-3)
for step in range(3):
    state, next_state = torch.randn(8, 4), torch.randn(8, 4)
    action = torch.randint(0, 2, (8, 1))
    reward = torch.randn(8)
    state_action_values = policy_net(state).gather(1, action)
    next_values = target_net(next_state).max(1)[0].detach()
    expected = reward + 0.99 * next_values
    loss = nn.functional.smooth_l1_loss(state_action_values.squeeze(1), expected)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", round(loss.item(), 4))
