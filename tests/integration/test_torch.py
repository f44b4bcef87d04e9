"""Real PyTorch (build/torch-venv, `make torch-env`) under vramtrace.

Without any stand-in PyTorch's CUDA build behaves as on a machine without a
GPU; on the simulated GPU (tests/simgpu/run --torch) it runs its caching
allocator, expandable segments, cudaMallocAsync and its out-of-memory path
for real. Every expected number comes from PyTorch itself in the same
process (tests/gpu/torch_checks.py prints them as JSON), never from here.
Each test is skipped, with its reason printed, when build/torch-venv is
absent.
"""
import atexit

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


# ------------------------------------------- on the simulated GPU
# tests/gpu/run.sh --sim torch runs every mode of tests/gpu/torch_checks.py
# (the script a GPU runs) on the stand-ins, under vramtrace and without it,
# once for all the tests below: each PyTorch import costs seconds.

_SIM = {}
GPU_CHECKS = {   # the checks torch_checks.py prints for each mode: none may go missing
    "mlp": 7, "train": 18, "expandable": 12, "async": 13, "nocache": 13, "limit": 6, "uw": 7, "viz": 14,
    "truth": 16, "frag": 9,
}


def sim_torch():
    if "run" not in _SIM:
        out = tempfile.mkdtemp(prefix="vt-torch-")
        atexit.register(shutil.rmtree, out, True)
        e = {k: v for k, v in os.environ.items()
             if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        e["OUT"] = out
        p = subprocess.run(["bash", os.path.join(ROOT, "tests", "gpu", "run.sh"), "--sim", "torch"], env=e,
                           capture_output=True, text=True, timeout=900)
        _SIM["run"] = (p, out)
    return _SIM["run"]


def sim_file(name):
    p, out = sim_torch()
    path = os.path.join(out, name)
    if not os.path.exists(path):
        raise Failure(f"tests/gpu/run.sh --sim torch wrote no {name}:\n" + p.stdout[-3000:] + p.stderr[-1000:])
    with open(path) as f:
        return f.read()


def all_pass(check_file, modes):
    lines = sim_file(check_file).splitlines()
    bad = [x for x in lines if not x.startswith("PASS ")]
    eq(bad, [], f"{check_file}: checks that did not pass")
    eq(len(lines), sum(GPU_CHECKS[m] for m in modes), f"{check_file}: number of checks")
    return lines


@torch_test
def torch_transparency():
    for mode in ("mlp", "train", "expandable", "async", "nocache"):
        # stderr without the times PyTorch's warnings start with
        for part in ("out", "err.untimed", "rc"):
            eq(sim_file(f"{mode}.{part}"), sim_file(f"{mode}.plain.{part}"), f"{mode}: {part} under vramtrace")
        eq(sim_file(f"{mode}.rc"), "0\n", f"{mode}: status")
        ok("vramtrace" not in sim_file(f"{mode}.err"), f"{mode}: nothing of vramtrace's on stderr (report to a file)")
    mlp = json.loads(sim_file("mlp.out"))
    eq(mlp["cuda_available"], True, "torch.cuda.is_available() on the simulated GPU")
    # Each allocator's own words: the caching allocator's, cudaMallocAsync's, the plain CUDA error check's.
    for mode, start in (("train", "CUDA out of memory. Tried to allocate 502.00 MiB. GPU 0 has a total capacity of "),
                        ("expandable", "CUDA out of memory. Tried to allocate 502.00 MiB. GPU 0 has a total capacity of "),
                        ("async", "Allocation on device 0 would exceed allowed memory. (out of memory)\n"),
                        ("nocache", "CUDA error: out of memory\n")):
        msg = json.loads(sim_file(f"{mode}.out"))["message"]
        ok(msg.startswith(start), f"{mode}: PyTorch's own error text: {msg!r}")


@torch_test
def torch_mlp_segments_and_lines():
    all_pass("mlp.check", ["mlp"])


@torch_test
def torch_oom_retry():
    all_pass("train.check", ["train"])


@torch_test
def torch_oom_expandable_async_nocache():
    for mode in ("expandable", "async", "nocache"):
        all_pass(f"{mode}.check", [mode])


@torch_test
def torch_budget_limit():
    all_pass("limit.check", ["limit"])


@torch_test
def torch_unwind_check():
    all_pass("uw.check", ["uw"])


@torch_test
def torch_export_in_memory_viz():
    all_pass("viz.check", ["viz"])


@torch_test
def torch_gpu_script_on_the_simulated_gpu():
    p, out = sim_torch()
    n = sum(GPU_CHECKS.values())
    eq(p.returncode, 0, "tests/gpu/run.sh --sim torch:\n" + p.stdout[-3000:] + p.stderr[-1000:])
    ok(f"gpu checks: {n} passed, 0 failed" in p.stdout, p.stdout[-1000:])
