#!/usr/bin/env python3
"""The PyTorch companion's costs on the simulated GPU with real PyTorch
(build/torch-venv). Printed by `make bench`; it asserts no time.

1. MLP training steps per second under vramtrace without and with the
   companion, and with --tensors (backend:cudaMallocAsync), --tensors=nocache
   (PYTORCH_NO_CUDA_MEMORY_CACHING=1) and PyTorch's own
   _record_memory_history(stacks="python") without vramtrace, from one
   interleaved run (bench_torch.py's worker and model; the fastest of
   BENCH_ROUNDS stretches of BENCH_STEPS steps each).
2. The work at an out-of-memory error for a model with 10,000 parameter
   tensors and 100,000 other live tensors: the companion's snapshot,
   garbage-collector walk and hand-over (time, Python memory at its peak,
   growth of the process's resident set), and the whole failing call as
   the program sees it (vramtrace's post-mortem, the companion, the OOM
   dump written again with PyTorch's record).

No kernels run on the simulated GPU: a step is PyTorch's CPU work only.
"""
import os
import resource
import subprocess
import sys
import tempfile
import time

import bench_torch   # its worker, model and interleaved rounds

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
B = os.path.join(ROOT, "build")
LIB = os.path.join(B, "libvramtrace.so")
SIMRUN = os.path.join(ROOT, "tests", "simgpu", "run")
BOOT = os.path.join(ROOT, "python", "vramtrace_torch", "_boot")
ROUNDS, STEPS = bench_torch.ROUNDS, bench_torch.STEPS


def oom_worker():
    """10,000 parameter tensors, 100,000 live tensors, then the companion's
    work alone and a whole out-of-memory error."""
    import tracemalloc
    import torch
    import vramtrace_torch
    dev = torch.device("cuda")
    model = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(5000)).to(dev)
    live = [torch.empty(16, device=dev) for _ in range(100000)]
    nparams = sum(1 for _ in model.parameters())
    # Time and resident set first (the fastest of three by the wall clock,
    # with its CPU time: the calling thread's, the companion's own, and the
    # process's, vramtrace's helper threads included); Python's memory in
    # a second run under tracemalloc (which slows every allocation it
    # traces).
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    runs = []
    for _ in range(3):
        t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
        vramtrace_torch._submit("signal")
        runs.append((time.perf_counter() - t0, time.thread_time() - c0, time.process_time() - p0))
    took, cpu, pcpu = min(runs)
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    vramtrace_torch._submit("signal")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    t0 = time.perf_counter()
    try:
        torch.empty(1 << 44, dtype=torch.uint8, device=dev)
    except torch.OutOfMemoryError:
        pass
    whole = time.perf_counter() - t0
    print(nparams, len(live), took, cpu, pcpu, peak, (rss1 - rss0) * 1024, whole, os.getloadavg()[0])


def main():
    if not bench_torch.ready("bench_companion"):
        return 0
    tmp = tempfile.mkdtemp(prefix="vt-bench-companion-")
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("VRAMTRACE_", "SIMGPU_")) and k not in ("LD_PRELOAD", "PYTHONPATH")}
    traced = {"LD_PRELOAD": LIB, "VRAMTRACE_OUT": os.path.join(tmp, "d.%p.json"), "VRAMTRACE_REPORT": "off"}
    configs = {
        "vramtrace, no companion": dict(traced),
        "vramtrace with the companion": dict(traced, PYTHONPATH=BOOT),
        "--tensors (cudaMallocAsync), companion": dict(traced, PYTHONPATH=BOOT,
                                                       PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync",
                                                       PYTORCH_ALLOC_CONF="backend:cudaMallocAsync"),
        "--tensors=nocache, companion": dict(traced, PYTHONPATH=BOOT, PYTORCH_NO_CUDA_MEMORY_CACHING="1"),
        "_record_memory_history(stacks=python)": {"BENCH_HISTORY": "1"},
    }
    best = bench_torch.interleaved(configs, base, "bench_companion")
    bench_torch.print_rates(best, "vramtrace, no companion")

    env = dict(base, **traced, PYTHONPATH=BOOT + ":" + os.path.join(ROOT, "python"), SIMGPU_CAPACITY="16G")
    p = subprocess.run([SIMRUN, "--torch", "--", "python3", os.path.abspath(__file__), "--oom"], env=env,
                       capture_output=True, text=True)
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    if p.returncode != 0 or not p.stdout.strip():
        sys.exit("bench_companion: the out-of-memory worker failed:\n" + p.stderr[-2000:])
    nparams, nlive, took, cpu, pcpu, peak, rss, whole, load = p.stdout.split()
    print(f"The work at an out-of-memory error, {nparams} parameter tensors and {nlive} other live tensors "
          f"(load average {float(load):.1f}):")
    print(f"  the companion (snapshot, garbage-collector walk, hand-over), the fastest of 3: {float(took):.3f} s "
          f"wall, {float(cpu):.3f} s CPU of its own thread ({float(pcpu):.3f} s of the process's, vramtrace's "
          f"threads included; on a busy machine the CPU time is the one to read), "
          f"Python memory at its peak {int(peak) / 2**20:.1f} MiB, resident set grew {int(rss) / 2**20:.1f} MiB "
          f"(targets: 2 s, 200 MB)")
    print(f"  the whole failing call (post-mortem, the companion, the OOM dump again): {float(whole):.3f} s")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--oom"]:
        oom_worker()
    else:
        sys.exit(main())
