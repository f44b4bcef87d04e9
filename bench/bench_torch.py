#!/usr/bin/env python3
"""Training steps per second of a small MLP with PyTorch (build/torch-venv)
on the simulated GPU: without vramtrace, with it (default options), and
with PyTorch's own torch.cuda.memory._record_memory_history() (Python
stacks), as ratios from one interleaved run. Printed by `make bench`; it
asserts no time.

The simulated GPU runs no kernels, so a step is only PyTorch's own work on
the CPU plus its allocator's calls: the worst case for vramtrace's hooks,
whose cost on a real GPU hides behind the kernels' time.

Three worker processes (one per configuration) each import PyTorch once and
build the model; the driver then asks them in turn for a stretch of steps,
BENCH_ROUNDS rounds (default 5), and keeps each one's fastest stretch.
"""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
B = os.path.join(ROOT, "build")
LIB = os.path.join(B, "libvramtrace.so")
SIMRUN = os.path.join(ROOT, "tests", "simgpu", "run")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
STEPS = int(os.environ.get("BENCH_STEPS", "200"))


def worker():
    """Build the model, then answer each line N on stdin with the seconds N
    steps took."""
    import torch
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256, 512, device=dev)
    y = torch.randint(0, 10, (256,), device=dev)
    if os.environ.get("BENCH_HISTORY") == "1":
        torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    print("ready", flush=True)
    for line in sys.stdin:
        n = int(line)
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        print(time.perf_counter() - t0, flush=True)


def interleaved(configs, base, who):
    """One worker per configuration (name -> environment over base), each
    asked in turn for STEPS steps, ROUNDS rounds: name -> its fastest
    stretch in seconds. `who` names the benchmark in errors."""
    procs = {}
    for name, extra in configs.items():
        procs[name] = subprocess.Popen([SIMRUN, "--torch", "--", "python3", os.path.abspath(__file__), "--worker"],
                                       env=dict(base, **extra), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, text=True)
    for name, p in procs.items():
        if p.stdout.readline().strip() != "ready":
            sys.exit(f"{who}: the worker '{name}' did not start (status {p.wait()})")
    best = {name: float("inf") for name in procs}
    for _ in range(ROUNDS):
        for name, p in procs.items():
            p.stdin.write(f"{STEPS}\n")
            p.stdin.flush()
            best[name] = min(best[name], float(p.stdout.readline()))
    for p in procs.values():
        p.stdin.close()
        p.wait()
    return best


def ready(who):
    """Whether build/torch-venv is there (else `who` says it is skipped);
    then the simulated GPU's stand-ins are built, once, before workers start
    at the same time."""
    if not os.path.exists(os.path.join(B, "torch-venv", "bin", "python3")):
        print(f"{who}: skipped, no build/torch-venv (make torch-env creates it)")
        return False
    subprocess.run(["make", "-s", "-C", ROOT, "sim-torch"], check=True)
    return True


def main():
    if not ready("bench_torch"):
        return 0
    tmp = tempfile.mkdtemp(prefix="vt-bench-torch-")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k != "LD_PRELOAD"}
    configs = {
        "without vramtrace": {},
        "vramtrace (default options)": {"LD_PRELOAD": LIB, "VRAMTRACE_OUT": os.path.join(tmp, "d.%p.json"),
                                        "VRAMTRACE_REPORT": "off"},
        "_record_memory_history (Python stacks)": {"BENCH_HISTORY": "1"},
    }
    best = interleaved(configs, base, "bench_torch")
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    print_rates(best, "without vramtrace", "; no GPU work, so the worst case for vramtrace's hooks")
    return 0


def print_rates(best, against, note=""):
    """interleaved's figures as steps per second, each also as a ratio to
    the configuration `against`."""
    base = STEPS / best[against]
    width = max(len(name) for name in best)
    print(f"PyTorch MLP training steps on the simulated GPU ({ROUNDS} interleaved rounds of {STEPS} steps, "
          f"fastest of each{note}):")
    for name in best:
        rate = STEPS / best[name]
        print(f"  {name:{width}s} {rate:8.1f} steps/s  {rate / base:.3f}x")


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
    else:
        sys.exit(main())
