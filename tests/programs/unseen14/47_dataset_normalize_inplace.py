# A miss of explore13 (benchmarks/RESULTS.md "Unseen programs"), found since leak14 by the mechanism its
# NOTE names; tests/test_unseen14.py runs it with its twin.
# From: pytorch/vision#680 (ToTensor aliases the data and Normalize worked in place: with the data set in memory,
# each epoch normalises the stored samples again and the data set drifts; our own program)
# expect-kind: kept-value-changed
import torch


class InMemoryDataset(torch.utils.data.Dataset):
    def __init__(self, images, labels, mean, std):
        self.images, self.labels, self.mean, self.std = images, labels, mean, std

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img = self.images[i]
        img.sub_(self.mean).div_(self.std)  # CULPRIT FIX: img = img.sub(self.mean).div(self.std)
        return img, self.labels[i]


torch.manual_seed(0)
images = torch.rand(16, 3, 4, 4) * 255
ref = images.clone()
ds = InMemoryDataset(images, torch.randint(0, 10, (16,)), 127.5, 64.0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = torch.utils.data.DataLoader(ds, batch_size=8)
for epoch in range(3):
    for xb, yb in loader:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
    print("epoch %d: mean of the stored images %.3f" % (epoch, images.mean().item()))
print("TRUTH changed=%s" % (not torch.equal(images, ref)))
