"""Real PyTorch (build/torch-venv, `make torch-env`) under vramtrace.

Without any stand-in PyTorch's CUDA build behaves as on a machine without a
GPU; on the simulated GPU (tests/simgpu/run --torch) it runs its caching
allocator, expandable segments, cudaMallocAsync and its out-of-memory path
for real. Every expected number comes from PyTorch itself in the same
process (tests/gpu/torch_checks.py prints them as JSON), never from here.
Each test is skipped, with its reason printed, when build/torch-venv is
absent.
"""
from run_tests import *  # noqa: F401,F403

TORCH_VENV = os.path.join(BUILD, "torch-venv")
TORCH_PY = os.path.join(TORCH_VENV, "bin", "python3")
HAVE_TORCH = os.path.exists(TORCH_PY)


def torch_test(fn):
    """Register fn when build/torch-venv exists; otherwise say it is skipped."""
    if HAVE_TORCH:
        return test(fn)
    print(f"SKIP {fn.__name__}: no build/torch-venv (`make torch-env` creates it)")
    return fn


# A CPU training step: what a script does on a machine without a GPU.
CPU_STEP = r"""
import sys, torch
print("cuda available:", torch.cuda.is_available(), "devices:", torch.cuda.device_count())
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(64, 16), torch.randn(64, 4)
for step in range(3):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f}")
print("to stderr", file=sys.stderr)
sys.exit(7)
"""


@torch_test
def torch_without_any_driver():
    a = run([TORCH_PY, "-c", CPU_STEP], preload=False, sim=False)
    b = run([TORCH_PY, "-c", CPU_STEP], preload=True, sim=False)
    ok(a.out.startswith("cuda available: False devices: 0\nstep 0 loss "), "PyTorch without a driver: " + a.out)
    eq(a.out.count("\nstep "), 3, "three training steps")
    eq(a.rc, 7, "the script's own status")
    eq((b.out, b.err, b.rc), (a.out, a.err, a.rc), "stdout, stderr and status under vramtrace")
    ok("vramtrace" not in b.err, "nothing of vramtrace's printed")
    eq(b.dumps, [], "no GPU memory was used: no dump")
