"""A PyTorch training loop with a classic leak, for `make demo`.

The evaluation pass forgets `torch.no_grad()` and keeps its outputs:
each kept output holds its autograd graph, and with it every activation of
its batch, so memory grows batch by batch until torch.OutOfMemoryError.
Under `vramtrace run` the post-mortem shows who holds the memory.
"""
import torch
import torch.nn.functional as F

dev = torch.device("cuda")
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
    torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
    torch.nn.Linear(4096, 1000),
).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)


def batch(size=2048):
    return torch.randn(size, 4096, device=dev), torch.randint(0, 1000, (size,), device=dev)


def train(steps):
    for _ in range(steps):
        x, y = batch()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()


def evaluate(batches):
    outputs = []
    for i in range(batches):
        x, _ = batch()
        outputs.append(model(x))    # the leak: no torch.no_grad(), and the graph is kept
        if i % 10 == 0:
            print(f"eval batch {i}: {torch.cuda.memory_allocated() / 2**30:.2f} GiB allocated")
    return torch.cat(outputs).argmax(1)


train(3)
evaluate(1000)
