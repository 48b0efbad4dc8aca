# Rewritten from pytorch/examples gcn with a row-normalised adjacency (D^-1 A) and no self-loops (our own program): a node with no edge has degree 0, so its row is 0/0 = NaN, which reaches the graph only as the stored values of a sparse input of torch.spmm.
# expect: kind=silent-non-finite-value line=14 op=div phase=forward sink=loss sink_line=34 sink_step=0
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
n_nodes, n_feats, n_classes = 10, 6, 3
edges = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7, 8, 0]])  # node 9 has no edge
adj = torch.zeros(n_nodes, n_nodes)
adj[edges[0], edges[1]] = 1.0
adj[edges[1], edges[0]] = 1.0
degree = adj.sum(dim=1, keepdim=True)
adj = adj / degree
adj = adj.to_sparse()


class GraphConv(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.kernel = nn.Parameter(torch.randn(n_in, n_out) * 0.3)

    def forward(self, x, a):
        return torch.spmm(a, torch.mm(x, self.kernel))


conv1, conv2 = GraphConv(n_feats, 8), GraphConv(8, n_classes)
opt = torch.optim.Adam(list(conv1.parameters()) + list(conv2.parameters()), lr=0.01)
x, labels = torch.randn(n_nodes, n_feats), torch.randint(0, n_classes, (n_nodes,))
for epoch in range(3):
    out = F.log_softmax(conv2(F.relu(conv1(x, adj)), adj), dim=1)
    loss = F.nll_loss(out, labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(epoch, round(loss.item(), 4))
