"""The PyTorch companion leaves PyTorch's allocator alone until the
program's first CUDA use: a program may still swap the allocator
(change_current_allocator) or set PYTORCH_CUDA_ALLOC_CONF after `import
torch`, as without vramtrace, and the companion's OOM observer is attached
however CUDA is first used. Real PyTorch on the simulated GPU, under
`vramtrace run`; skipped without build/torch-venv.
"""
from run_tests import *  # noqa: F401,F403
from test_torch_truth import SIMRUN, clean_env, in_dir, same_under_vramtrace_run, untimed

TORCHALLOC = os.path.join(T, "libt_torchalloc.so")

SWAPPED = r"""
import sys, torch
a = torch.cuda.memory.CUDAPluggableAllocator(sys.argv[1], "t_malloc", "t_free")
torch.cuda.memory.change_current_allocator(a)
keep = [torch.empty(100 << 20, dtype=torch.uint8, device="cuda") for i in range(5)]
tmp = torch.empty(50 << 20, dtype=torch.uint8, device="cuda")
del tmp
print("kept", len(keep))
"""


def plain_and_run(script, *args, plain=True):
    """script (text) run without vramtrace (unless not plain) and under
    `vramtrace run` (dumps to files, the report off) on an 8 GiB simulated
    GPU; return both results (None for the one not run) and the run's dumps
    by reason."""
    work = tempfile.mkdtemp(prefix="vt-untouched-")
    try:
        with open(os.path.join(work, "prog.py"), "w") as f:
            f.write(script)
        e = clean_env(SIMGPU_CAPACITY="8G", SIMGPU_CONTEXT="300M")
        a = None if not plain else in_dir([SIMRUN, "--torch", "--", "python3", "prog.py", *args], work, e)
        b = in_dir([SIMRUN, "--torch", "--", CLI, "run", "--out", os.path.join(work, "d.%p.json"), "--report", "off",
                    "--", "python3", "prog.py", *args], work, e)
        dumps = {}
        for x in glob.glob(os.path.join(work, "d.*.json")):
            d = json.load(open(x))
            dumps[d["reason"]] = d
        return a, b, dumps
    finally:
        shutil.rmtree(work, ignore_errors=True)


@torch_test
def torch_untouched_a_pluggable_allocator_can_be_swapped_in():
    """change_current_allocator after `import torch` refused ("Can't swap
    an already initialized allocator", status 1): the companion had made
    the caching allocator at import. Now the program runs as without
    vramtrace, its allocator's cudaMalloc calls are traced, and vramtrace
    says once that this allocator gives PyTorch's own view to no one."""
    a, b, dumps = plain_and_run(SWAPPED, TORCHALLOC)
    eq((a.stdout, a.returncode), ("kept 5\n", 0), "the program without vramtrace")
    eq((b.stdout, b.returncode), ("kept 5\n", 0), "the program under vramtrace run")
    warning = ("vramtrace: warning: PyTorch's allocator is a CUDAPluggableAllocator, which has no out-of-memory "
               "observer, statistics or snapshot: its CUDA calls are recorded, without PyTorch's own view of them\n")
    eq(untimed(b.stderr), untimed(a.stderr) + warning, "stderr: the program's, then the one warning")
    d = dumps["exit"]
    eq((d["totals"]["live_bytes"], d["totals"]["live_count"]), (500 << 20, 5), "live at exit: the five tensors")
    eq((d["devices"][0]["peak_bytes"], d["devices"][0]["alloc_count"], d["devices"][0]["free_count"]), (550 << 20, 6, 1),
       "each tensor its own cudaMalloc, the freed one a cudaFree")
    eq("torch" in d, False, "no record of PyTorch's own view")


LATE_CONF = r"""
import os, sys, torch
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = sys.argv[1]
x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
segs = torch.cuda.memory._snapshot()["segments"]
print(torch.cuda.get_allocator_backend(), [s["is_expandable"] for s in segs])
"""


@torch_test
def torch_untouched_alloc_conf_set_after_import_is_read():
    """PYTORCH_CUDA_ALLOC_CONF set after `import torch`, before the first
    CUDA use, was ignored under vramtrace (the companion made PyTorch read
    it at import): expandable segments stayed off. Now PyTorch reads it at
    the first CUDA use, as without vramtrace, and the record says it."""
    a, b, dumps = plain_and_run(LATE_CONF, "expandable_segments:True")
    eq((a.stdout, a.returncode), ("native [True]\n", 0), "without vramtrace")
    eq((b.stdout, untimed(b.stderr), b.returncode), (a.stdout, untimed(a.stderr), a.returncode),
       "under vramtrace run")
    eq([t["settings"] for t in dumps["exit"]["torch"]], ["expandable_segments:True,max_split_size:-1"],
       "the exit record's settings")
    # A backend named after import: PyTorch's own assertion stops the
    # program, as without vramtrace (it ran on, on the native allocator).
    same_under_vramtrace_run(["python3", "-c", LATE_CONF, "backend:cudaMallocAsync"], sim=True)


FIRST_USE = r"""
import sys, torch
how = sys.argv[1]
if how == "init":
    torch.cuda.init()
elif how == "set_device":
    torch.cuda.set_device(0)
elif how == "cuda":
    first = torch.ones(1 << 20, dtype=torch.uint8).cuda()
elif how == "memory_allocated":
    print(torch.cuda.memory_allocated())
keep = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
try:
    torch.empty(8000 << 20, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    print("failed", sys.modules["vramtrace_torch"]._state["observer"])
"""


@torch_test
def torch_untouched_the_observer_is_attached_however_cuda_starts():
    """The OOM observer, attached in torch.cuda's lazy initialisation, is
    there whichever call first uses CUDA, and its record of PyTorch's cache
    comes with the failure (the last of its two failed cudaMalloc calls:
    PyTorch frees its cache and asks again)."""
    for how, out, cache in (("tensor", "failed True\n", (64 << 20, 64 << 20)),
                            ("init", "failed True\n", (64 << 20, 64 << 20)),
                            ("set_device", "failed True\n", (64 << 20, 64 << 20)),
                            ("cuda", "failed True\n", (65 << 20, 66 << 20)),   # 1 MiB more, in a 2 MiB segment
                            ("memory_allocated", "0\nfailed True\n", (64 << 20, 64 << 20))):
        _, b, dumps = plain_and_run(FIRST_USE, how, plain=False)
        eq((b.stdout, b.returncode), (out, 0), f"{how}: the run")
        ooms = dumps["exit"]["ooms"]
        eq([(o["api"], o["requested_bytes"]) for o in ooms], [("cudaMalloc", 8000 << 20)] * 2, f"{how}: the failures")
        eq([[(t["allocated_bytes"], t["reserved_bytes"]) for t in o.get("torch", [])] for o in ooms], [[], [cache]],
           f"{how}: PyTorch's cache at the failure")
