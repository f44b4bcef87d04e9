"""A PyTorch training loop with a classic leak, for `make demo`.

`running_loss += loss` (instead of `loss.item()`) keeps every step's
autograd graph, and with it that step's activations, alive: memory grows
each step until torch.OutOfMemoryError. Under `vramtrace run` the
post-mortem names the lines that hold the memory.
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


running_loss = 0.0
for step in range(1000):
    x, y = batch()
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    running_loss += loss          # the leak: keeps the graph; `loss.item()` would not
    loss.backward(retain_graph=True)
    opt.step()
    if step % 10 == 0:
        print(f"step {step}: {torch.cuda.memory_allocated() / 2**30:.2f} GiB allocated, "
              f"{torch.cuda.memory_reserved() / 2**30:.2f} GiB reserved")
